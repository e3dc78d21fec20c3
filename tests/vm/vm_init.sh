#!/bin/busybox sh
# VM lane: the initramfs's /init - loads the modules, mounts the host's / over 9p, runs the command, powers off.
#
# run.sh passes ff_vm_dir=DIR on the kernel command line: a host folder (seen at the same path after
# the chroot) holding cmd.sh, the command to run (bash: it is written with printf %q); the exit status goes back into DIR/status and as a
# marker line on the console ("ff-vm: status N"), which run.sh reads if the file is missing.
/bin/busybox --install -s /bin
export PATH=/bin

say() { echo "ff-vm: $*"; }
finish() {
  sync
  poweroff -f
  # poweroff -f does not return; if it did, panic=-1 plus -no-reboot ends qemu when init exits.
  exit 1
}

mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev

for m in $(cat /modules.load); do
  insmod "/lib/modules/$m" 2>/dev/null || {
    # A module already built in or loaded is fine; anything else is shown but not fatal here:
    # the command's own checks say what is missing.
    grep -q "^${m%.ko} " /proc/modules || say "insmod $m failed: $(insmod "/lib/modules/$m" 2>&1)"
  }
done

dir=""
for arg in $(cat /proc/cmdline); do
  case "$arg" in ff_vm_dir=*) dir="${arg#ff_vm_dir=}" ;; esac
done
[ -n "$dir" ] || { say "no ff_vm_dir= on the kernel command line"; finish; }

# msize: 9p's default (8 KiB) makes every read of a binary or library crawl.
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000,cache=none hostroot /host || {
  say "cannot mount the host's root over 9p (tag hostroot)"; finish; }
mount -t proc proc /host/proc
mount -t sysfs sys /host/sys
mount -t devtmpfs dev /host/dev
# devtmpfs lacks the links udev or systemd would make; bash's <(...) needs /dev/fd.
ln -sf /proc/self/fd /host/dev/fd
ln -sf /proc/self/fd/0 /host/dev/stdin
ln -sf /proc/self/fd/1 /host/dev/stdout
ln -sf /proc/self/fd/2 /host/dev/stderr
mkdir -p /host/dev/pts /host/dev/shm
mount -t devpts devpts /host/dev/pts
# Fresh tmpfs: programs in the VM must never write the host's /run (sockets, pid files, locks).
mount -t tmpfs -o mode=1777 shm /host/dev/shm
mount -t tmpfs -o mode=0755 run /host/run
mount -t debugfs debugfs /host/sys/kernel/debug 2>/dev/null
ip link set lo up

[ -f "/host$dir/cmd.sh" ] || { say "no $dir/cmd.sh on the host"; finish; }
say "running the command"
chroot /host /bin/bash "$dir/cmd.sh" </dev/console >/dev/console 2>&1
rc=$?
echo "$rc" >"/host$dir/status"
say "status $rc"
umount /host/run /host/dev/shm /host/dev/pts /host/dev /host/sys /host/proc 2>/dev/null
umount /host 2>/dev/null
finish
