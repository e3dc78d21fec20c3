#!/usr/bin/env bash
# VM lane: fetches Debian's stock kernel (without installing it) and builds a busybox initramfs into a cache folder.
#
# Usage: tests/vm/prepare.sh        (FF_VM_CACHE overrides the cache folder, default /var/cache/flexiforce-vm)
# Prints the cache's kernel and initramfs paths on its last two lines ("kernel=..." / "initrd=...").
# Exit status: 0 ready, 77 this machine cannot prepare the VM (no package reachable, not root), 1 a bug.
# A valid cache (its stamp matches the kernel version, the module list and this script) costs well
# under a second and touches no network.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
cache="${FF_VM_CACHE:-/var/cache/flexiforce-vm}"

say() { echo "vm-prepare: $*" >&2; }
unavailable() { say "cannot prepare the VM here: $*"; exit 77; }

# Modules the lane needs in the VM. Dependencies are added by modprobe --show-depends.
# crc32_generic: rxe computes its ICRC through the crypto API; without it "rdma link add" fails with ENOENT.
# virtio_pci + 9p*: the host's root filesystem arrives over virtio-9p. nf_tables & co: drop rules.
required_modules=(virtio_pci 9p 9pnet_virtio rdma_rxe ib_uverbs rdma_ucm crc32_generic veth sch_netem
                  nf_tables nfnetlink)
# Nice to have; a kernel without one of these still gives a working lane (warned, not fatal).
optional_modules=(nft_ct nft_reject_inet nft_limit nft_numgen sch_tbf sch_prio cls_u32 cls_flower
                  act_gact act_mirred ib_umad af_packet)

# Host packages: kmod for depmod/modprobe -d, busybox-static for the initramfs (and its cpio), qemu to boot;
# the rest is the user space the VM borrows from the host through 9p.
host_packages=(kmod busybox-static qemu-system-x86 rdma-core ibverbs-providers ibverbs-utils perftest
               iproute2 nftables)

ensure_packages() {
  local missing=() p
  for p in "${host_packages[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
  done
  ((${#missing[@]})) || return 0
  [ "$(id -u)" -eq 0 ] || unavailable "missing packages ${missing[*]} and not root to install them"
  say "installing ${missing[*]}"
  apt-get update -qq >&2 || unavailable "apt-get update failed (no network to the Debian mirror?)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
    || unavailable "apt-get install ${missing[*]} failed (no network to the Debian mirror?)"
}

# The current stock kernel: the package linux-image-amd64 (a metapackage) depends on.
kernel_package() {
  apt-cache depends linux-image-amd64 2>/dev/null |
    sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*-amd64\)$/\1/p' | awk 'NR == 1'
}

command -v apt-get >/dev/null || unavailable "no apt-get (this lane expects Debian)"
ensure_packages
for tool in depmod modprobe busybox qemu-system-x86_64 dpkg; do
  command -v "$tool" >/dev/null || unavailable "no $tool on PATH after installing packages"
done

pkg="$(kernel_package)"
if [ -z "$pkg" ] && [ "$(id -u)" -eq 0 ]; then
  # Package lists may never have been fetched on a fresh image.
  apt-get update -qq >&2 || true
  pkg="$(kernel_package)"
fi
if [ -z "$pkg" ] && [ -f "$cache/stamp" ]; then
  # No apt metadata now (offline): keep using what the cache holds.
  pkg="$(sed -n 's/^package=//p' "$cache/stamp")"
  say "apt-cache does not resolve linux-image-amd64; using the cached $pkg"
fi
[ -n "$pkg" ] || unavailable "apt-cache does not know linux-image-amd64 (no Debian package lists?)"
kver="${pkg#linux-image-}"

# The stamp names everything the result depends on: kernel, module lists, the scripts that go into it.
init_sum="$(cat "$0" "$here/vm_init.sh" | sha256sum | cut -c1-16)"
stamp_want="package=$pkg
kernel=$kver
modules=${required_modules[*]} | ${optional_modules[*]}
scripts=$init_sum"
kdir="$cache/kernel/$kver"
kernel="$kdir/boot/vmlinuz-$kver"
initrd="$cache/initrd-$kver.img"

cache_valid() {
  [ -f "$cache/stamp" ] && [ "$(cat "$cache/stamp")" = "$stamp_want" ] && [ -f "$kernel" ] && [ -f "$initrd" ]
}
report() {
  echo "kernel=$kernel"
  echo "initrd=$initrd"
}
if cache_valid; then
  say "cache valid: $pkg in $cache"
  report
  exit 0
fi

mkdir -p "$cache" 2>/dev/null || unavailable "cannot create the cache folder $cache (set FF_VM_CACHE)"
[ -w "$cache" ] || unavailable "cache folder $cache is not writable (set FF_VM_CACHE)"
# One builder at a time (two lanes or a developer's run alongside CI); a waiter then finds it valid.
exec 8>"$cache/lock"
flock 8
if cache_valid; then
  say "cache valid: $pkg in $cache (built by another run)"
  report
  exit 0
fi
rm -f "$cache/stamp"

# 1. The kernel package, unpacked, never installed: apt-get download + dpkg -x.
if [ ! -f "$kernel" ] || [ ! -d "$kdir/lib/modules/$kver" ]; then
  dl="$cache/download"
  rm -rf "$dl" "$kdir"
  mkdir -p "$dl"
  say "downloading $pkg (about 70 MB)"
  # apt-get download writes into the current directory; as root it drops to _apt, which needs write access.
  chmod 0777 "$dl"
  (cd "$dl" && apt-get download -qq "$pkg" >&2) \
    || unavailable "apt-get download $pkg failed (no network to the Debian mirror?)"
  deb="$(ls "$dl"/linux-image-*.deb 2>/dev/null | awk 'NR == 1')"
  [ -n "$deb" ] || unavailable "apt-get download $pkg produced no .deb in $dl"
  say "unpacking $(basename "$deb")"
  mkdir -p "$kdir.tmp"
  dpkg -x "$deb" "$kdir.tmp"
  mv "$kdir.tmp" "$kdir"
  rm -rf "$dl"
fi
[ -f "$kernel" ] || { say "the package $pkg holds no boot/vmlinuz-$kver"; exit 1; }
# A newer Debian kernel replaced an older one: drop the old tree (about 400 MB) and its initramfs.
for old in "$cache"/kernel/*; do
  [ "$old" = "$kdir" ] || [ ! -d "$old" ] || { say "removing the old kernel ${old##*/}"; rm -rf "$old" "$cache/initrd-${old##*/}.img"; }
done
# Debian's package ships no modules.dep (postinst runs depmod): make it, inside the cache only.
depmod -b "$kdir" "$kver"

# 2. The initramfs: busybox, the init, and the modules in load order.
work="$cache/initrd.work"
rm -rf "$work"
mkdir -p "$work"/{bin,dev,proc,sys,host,lib/modules}
# The initramfs has no libc: busybox must be the static build (package busybox, not -static, is dynamic).
if grep -q 'program interpreter' <<<"$(LC_ALL=C readelf -l /bin/busybox 2>/dev/null)"; then
  unavailable "/bin/busybox is dynamically linked: install busybox-static (it replaces busybox)"
fi
cp /bin/busybox "$work/bin/busybox"
cp "$here/vm_init.sh" "$work/init"
chmod 0755 "$work/init" "$work/bin/busybox"

order=()   # module files, dependencies first, each once
add_module() {  # $1 name, $2 required|optional
  local deps line path
  if ! deps="$(modprobe -d "$kdir" -S "$kver" --show-depends "$1" 2>&1)"; then
    if [ "$2" = required ]; then
      say "the kernel $kver has no module $1: $deps"
      exit 1
    fi
    say "note: optional module $1 is not in $kver, left out"
    return 0
  fi
  while read -r line; do
    case "$line" in
      insmod\ *)
        path="${line#insmod }"; path="${path%% *}"
        [[ " ${order[*]} " == *" $path "* ]] || order+=("$path") ;;
      builtin\ *) ;;  # compiled into the kernel: nothing to load
    esac
  done <<<"$deps"
}
for m in "${required_modules[@]}"; do add_module "$m" required; done
for m in "${optional_modules[@]}"; do add_module "$m" optional; done

: >"$work/modules.load"
for path in "${order[@]}"; do
  name="$(basename "$path")"
  # Busybox insmod reads plain .ko only: unpack compressed modules here.
  case "$name" in
    *.ko.xz)  xz -dc "$path" >"$work/lib/modules/${name%.xz}"; name="${name%.xz}" ;;
    *.ko.zst) zstd -qdc "$path" >"$work/lib/modules/${name%.zst}"; name="${name%.zst}" ;;
    *.ko.gz)  gzip -dc "$path" >"$work/lib/modules/${name%.gz}"; name="${name%.gz}" ;;
    *)        cp "$path" "$work/lib/modules/$name" ;;
  esac
  echo "$name" >>"$work/modules.load"
done
say "initramfs: ${#order[@]} modules"

(cd "$work" && find . -mindepth 1 | busybox cpio -o -H newc -R 0:0 2>/dev/null) | gzip -1 >"$initrd.tmp"
mv "$initrd.tmp" "$initrd"
rm -rf "$work"
printf '%s\n' "$stamp_want" >"$cache/stamp"
say "ready: $pkg in $cache"
report
