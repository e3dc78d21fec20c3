#!/usr/bin/env bash
# VM lane: boots Debian's kernel under QEMU with the host's / over 9p and runs one command in it as root.
#
# Usage: tests/vm/run.sh [--timeout S] [--mem M] [--cwd DIR] -- COMMAND [ARG...]
#   --timeout S  hard limit for the VM, boot included (default 600): qemu is killed, exit 124
#   --mem M      guest memory in MiB (default 2048)
#   --cwd DIR    working directory of COMMAND (default: the current directory)
# Environment: FF_VM_CACHE (kernel cache, see prepare.sh), FF_VM_ACCEL=tcg|kvm (default tcg),
# FF_VM_VERBOSE=1 (kernel messages too), FF_VM_TMP (exchange folder's parent, default /tmp).
# Variables named FF_*, AI_*, FLEXIFORCE_* and NCCL_* are passed to COMMAND.
# Exit status: COMMAND's; 124 timeout; 125 the VM ended without reporting a status; 77 cannot run here.
# Inside the VM: modules loaded (rdma_rxe, veth, netem, nf_tables...), no network set up (use
# tests/vm/rxe_fixture.sh), the host's files read-write, fresh tmpfs on /run, /dev/shm; FF_IN_VM=1.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
say() { echo "vm-run: $*" >&2; }
usage() { sed -n '3,13s/^# \{0,1\}//p' "$0" >&2; exit 2; }

timeout_s=600
mem=2048
cwd="$PWD"
while (($#)); do
  case "$1" in
    --timeout) timeout_s="${2:?--timeout needs seconds}"; shift 2 ;;
    --mem) mem="${2:?--mem needs MiB}"; shift 2 ;;
    --cwd) cwd="${2:?--cwd needs a directory}"; shift 2 ;;
    --) shift; break ;;
    -h|--help) usage ;;
    *) say "unknown option $1"; usage ;;
  esac
done
(($#)) || { say "no command given"; usage; }
[[ "$timeout_s" =~ ^[0-9]+$ ]] || { say "--timeout takes whole seconds, not '$timeout_s'"; exit 2; }
[[ "$mem" =~ ^[0-9]+$ ]] || { say "--mem takes MiB, not '$mem'"; exit 2; }
cwd="$(cd "$cwd" && pwd)" || { say "no directory $cwd"; exit 2; }
case "$cwd/" in
  /run/*|/dev/shm/*|/proc/*|/sys/*|/dev/*)
    say "the VM mounts its own $cwd's file system; pick a working directory elsewhere"; exit 2 ;;
esac

# Files the VM creates through 9p belong to the user running qemu; the command runs as root in the VM.
[ "$(id -u)" -eq 0 ] || { say "cannot run here: needs root (the VM writes the host's files as root over 9p)"; exit 77; }

set +e
prep="$(bash "$here/prepare.sh")"
rc=$?
set -e
if [ "$rc" -ne 0 ]; then
  [ "$rc" -eq 77 ] && say "cannot run here: the VM's kernel could not be prepared (see above)"
  exit "$rc"
fi
kernel="$(sed -n 's/^kernel=//p' <<<"$prep")"
initrd="$(sed -n 's/^initrd=//p' <<<"$prep")"

# TCG by default: on this machine kind /dev/kvm may exist and open, yet a nested KVM guest hangs in
# early boot (and "-cpu host" aborts on MSR 0x10a), so KVM is opt-in where it is known to work.
accel="${FF_VM_ACCEL:-tcg}"
case "$accel" in
  kvm) accel_args=(-accel kvm -cpu host,-arch-capabilities) ;;
  tcg) accel_args=(-accel tcg,thread=multi -cpu max) ;;
  *) say "FF_VM_ACCEL is tcg or kvm, not '$accel'"; exit 2 ;;
esac

# The exchange folder: under /tmp, which the VM sees at the same path (its /run and /dev/shm are its own).
xdir="$(mktemp -d "${FF_VM_TMP:-/tmp}/ff-vm.XXXXXX")"
trap 'rm -rf "$xdir"' EXIT
trap 'exit 130' INT TERM

{
  echo "# written by tests/vm/run.sh: the command to run inside the VM"
  echo "export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root TERM=dumb FF_IN_VM=1"
  while IFS= read -r var; do
    printf 'export %s=%q\n' "$var" "${!var}"
  done < <(compgen -e | grep -E '^(FF_|AI_|FLEXIFORCE_|NCCL_)' || true)
  printf 'cd %q || exit 125\n' "$cwd"
  printf 'exec'
  printf ' %q' "$@"
  printf '\n'
} >"$xdir/cmd.sh"

append="console=ttyS0 panic=-1 ff_vm_dir=$xdir"
[ "${FF_VM_VERBOSE:-0}" = 1 ] || append="quiet loglevel=3 $append"

say "booting $(basename "$kernel") ($accel, ${mem} MiB, timeout ${timeout_s} s): $*"
start=$(date +%s.%N)
set +e
# The console streams through, each line prefixed, and is kept for the status marker.
timeout -k 10 "$timeout_s" qemu-system-x86_64 "${accel_args[@]}" -m "$mem" -smp 2 -nographic -no-reboot \
    -net none -kernel "$kernel" -initrd "$initrd" -append "$append" \
    -virtfs local,path=/,mount_tag=hostroot,security_model=none,multidevs=remap \
    </dev/null 2>&1 |
  tr -d '\r' | sed -u 's/\x1b\[[0-9;?]*[A-Za-z]//g; s/\x1bc//g' | tee "$xdir/console.log" | sed -u 's/^/[vm] /'
qrc=${PIPESTATUS[0]}
set -e
elapsed=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')

if [ -f "$xdir/status" ]; then
  status="$(cat "$xdir/status")"
elif grep -q '^ff-vm: status [0-9]*$' "$xdir/console.log"; then
  status="$(sed -n 's/^ff-vm: status \([0-9]*\)$/\1/p' "$xdir/console.log" | tail -n1)"
elif [ "$qrc" -eq 124 ] || [ "$qrc" -eq 137 ]; then
  say "timed out after ${timeout_s} s: qemu killed"
  exit 124
else
  say "the VM ended without a status (qemu exit $qrc, ${elapsed} s): see its console above"
  exit 125
fi
say "command exited $status (${elapsed} s in the VM)"
exit "$status"
