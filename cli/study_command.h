// `ringctl study scaling | list | get | compare` (docs/ringctl.md, "ringctl study").
//
// scaling: 1. one job per size (replicas = GPUs, one GPU each; CPU ranks with --cpu), labelled
//          study=ID, submitted one after the other (each waits for the one before, so they do
//          not share the cluster) or all together with --parallel; 2. each job is followed to
//          its end (GetJob, backing off to 2 s); 3. rank 0's log of a job that SUCCEEDED gives its
//          `total images/sec`; 4. the study is stored (study_store.h), its chart written, and
//          the table printed. Exit 0 when every size has a figure, 5 when a job did not succeed.
#ifndef RINGMASTER_CLI_STUDY_COMMAND_H_
#define RINGMASTER_CLI_STUDY_COMMAND_H_

#include <ostream>

#include "app.h"
#include "args.h"
#include "client.h"

namespace ringmaster::cli {

int RunStudyCommand(const Command& cmd, const Runtime& runtime, SchedulerClient& client,
                    std::ostream& out, std::ostream& err);

}  // namespace ringmaster::cli

#endif  // RINGMASTER_CLI_STUDY_COMMAND_H_
