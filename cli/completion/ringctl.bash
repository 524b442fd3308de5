# bash completion for ringctl. Installed by `cmake --install BUILD --component ringctl` into
# share/bash-completion/completions/ringctl (bash-completion loads it on first use); or
# `source cli/completion/ringctl.bash` by hand. Completes commands, each command's flags, the
# values of --output, --state and --restart-policy, YAML files after -f, and job ids (from
# `ringctl list`) where a command takes one. tests/cli/args_test.cc checks that every flag in
# `ringctl COMMAND --help` is listed here.

_ringctl() {
  local cur prev words cword
  if declare -F _init_completion >/dev/null 2>&1; then
    _init_completion -n = || return
  else
    cur=${COMP_WORDS[COMP_CWORD]}
    prev=${COMP_WORDS[COMP_CWORD - 1]}
    words=("${COMP_WORDS[@]}")
    cword=$COMP_CWORD
  fi

  local commands="submit get list cancel watch workers logs queue volume registry study admin help"
  local global="--scheduler --output -o --tls-ca --tls-cert --tls-key --token --insecure --help -h"
  local cmd="" i scheduler=()
  for ((i = 1; i < cword; i++)); do
    case ${words[i]} in
      --) return 0 ;;  # a command workload: no completion of its arguments
      --scheduler) scheduler=(--scheduler "${words[i + 1]}") ;;
      --scheduler=*) scheduler=("${words[i]}") ;;
    esac
    if [[ -z $cmd && " $commands " == *" ${words[i]} "* ]]; then
      cmd=${words[i]}
    fi
  done

  case $prev in
    -o | --output) COMPREPLY=($(compgen -W "table json" -- "$cur")); return 0 ;;
    --state)
      COMPREPLY=($(compgen -W "pending starting running succeeded failed cancelled" -- "$cur"))
      return 0 ;;
    --restart-policy) COMPREPLY=($(compgen -W "Never OnFailure" -- "$cur")); return 0 ;;
    --tls-ca | --tls-cert | --tls-key | --chart) COMPREPLY=($(compgen -f -- "$cur")); return 0 ;;
    -f | --file)
      if [[ $cmd == submit || $cmd == queue ]]; then
        COMPREPLY=($(compgen -f -- "$cur"))
        return 0
      fi ;;
    --scheduler | --name | --queue | --priority | --replicas | --gpus-per-replica | \
      --gpu-type | --model | --steps | --batch-size | --checkpoint-every | --backoff-limit | \
      --max-runtime-seconds | --label | --request-id | --retry-seconds | --limit | --page-size | \
      -l | --selector | --reason | --rank | --attempt | --gpus | --image | --mount | --shm-size | --after | \
      --workdir | --path | --grant | --description | --array | --index)
      return 0 ;;
  esac

  local flags=""
  case $cmd in
    submit)
      flags="--file -f --name --queue --priority --replicas --sizes-divide --gpus-per-replica --gpu-type --gpu-share --gpu-memory
             --model --steps --batch-size --checkpoint-every --restart-policy --backoff-limit
             --max-runtime-seconds --label --image --mount --shm-size --workdir --request-id
             --use-mpirun --after --array --retry-seconds --wait --follow" ;;
    get) flags="" ;;
    list) flags="--state --queue --selector -l --array --limit --page-size" ;;
    cancel) flags="--reason" ;;
    watch) flags="" ;;
    workers) flags="" ;;
    logs) flags="--index --rank --attempt --follow -f" ;;
    queue) flags="--file -f" ;;
    volume) flags="--path --grant --description" ;;
    registry) flags="--username --password-stdin --password-file --team --all" ;;
    study)
      flags="--gpus --parallel --cpu --chart --queue --gpu-type --model --steps --batch-size
             --label" ;;
    help) COMPREPLY=($(compgen -W "$commands" -- "$cur")); return 0 ;;
    "") COMPREPLY=($(compgen -W "$commands $global" -- "$cur")); return 0 ;;
  esac

  if [[ $cur == -* ]]; then
    COMPREPLY=($(compgen -W "$flags $global" -- "$cur"))
    return 0
  fi
  case $cmd in
    queue)
      if [[ ${words[cword - 1]} == queue ]]; then
        COMPREPLY=($(compgen -W "create get list update delete" -- "$cur"))
      fi ;;
    volume)
      if [[ ${words[cword - 1]} == volume ]]; then
        COMPREPLY=($(compgen -W "create get list update delete" -- "$cur"))
      fi ;;
    registry)
      if [[ ${words[cword - 1]} == registry ]]; then
        COMPREPLY=($(compgen -W "set list delete" -- "$cur"))
      fi ;;
    study)
      if [[ ${words[cword - 1]} == study ]]; then
        COMPREPLY=($(compgen -W "scaling list get compare" -- "$cur"))
      fi ;;
    get | cancel | watch | logs)
      # Job ids of the newest jobs, from the scheduler (quietly nothing when unreachable).
      local ids
      ids=$(ringctl "${scheduler[@]}" list --limit 200 2>/dev/null | awk 'NR > 1 { print $1 }')
      COMPREPLY=($(compgen -W "$ids" -- "$cur")) ;;
  esac
  return 0
}
complete -F _ringctl ringctl
