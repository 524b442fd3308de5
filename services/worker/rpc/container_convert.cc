#include "worker/rpc/container_convert.h"

namespace ringmaster::worker {

v1::RankContainer ToProto(const ContainerRun& run) {
  v1::RankContainer proto;
  proto.set_runtime(run.runtime);
  proto.set_image(run.image);
  proto.set_name(run.name);
  for (const auto& [k, v] : run.labels) (*proto.mutable_labels())[k] = v;
  for (const ContainerMount& m : run.mounts) {
    v1::ContainerMount* mount = proto.add_mounts();
    mount->set_host_path(m.host_path);
    mount->set_container_path(m.container_path);
    mount->set_read_only(m.read_only);
  }
  for (const std::string& d : run.devices) proto.add_devices(d);
  proto.set_shm_size_bytes(run.shm_size_bytes);
  proto.set_workdir(run.workdir);
  proto.set_user(run.user);
  for (const std::string& a : run.extra_args) proto.add_extra_args(a);
  for (const auto& [k, v] : run.env_values) (*proto.mutable_env_values())[k] = v;
  return proto;
}

ContainerRun FromProto(const v1::RankContainer& proto) {
  ContainerRun run;
  run.runtime = proto.runtime();
  run.image = proto.image();
  run.name = proto.name();
  for (const auto& [k, v] : proto.labels()) run.labels[k] = v;
  for (const v1::ContainerMount& m : proto.mounts()) {
    run.mounts.push_back({m.host_path(), m.container_path(), m.read_only()});
  }
  run.devices.assign(proto.devices().begin(), proto.devices().end());
  run.shm_size_bytes = proto.shm_size_bytes();
  run.workdir = proto.workdir();
  run.user = proto.user();
  run.extra_args.assign(proto.extra_args().begin(), proto.extra_args().end());
  for (const auto& [k, v] : proto.env_values()) run.env_values[k] = v;
  return run;
}

}  // namespace ringmaster::worker
