#include "scheduler/convert/volume_convert.h"

namespace ringmaster::scheduler {

Volume FromProto(const v1::Volume& volume) {
  Volume out;
  out.name = volume.name();
  out.host_path = volume.host_path();
  for (const v1::VolumeGrant& g : volume.grants()) out.grants.push_back({g.team(), g.read_only()});
  out.description = volume.description();
  out.created_at_ms = volume.created_at_ms();
  out.updated_at_ms = volume.updated_at_ms();
  return out;
}

v1::Volume ToProto(const Volume& volume) {
  v1::Volume out;
  out.set_name(volume.name);
  out.set_host_path(volume.host_path);
  for (const VolumeGrant& g : volume.grants) {
    v1::VolumeGrant* grant = out.add_grants();
    grant->set_team(g.team);
    grant->set_read_only(g.read_only);
  }
  out.set_description(volume.description);
  out.set_created_at_ms(volume.created_at_ms);
  out.set_updated_at_ms(volume.updated_at_ms);
  return out;
}

}  // namespace ringmaster::scheduler
