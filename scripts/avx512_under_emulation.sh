#!/usr/bin/env bash
# Runs the kernel tests on an emulated AVX-512 CPU, for machines that have none: boots Debian's cloud Linux kernel
# in Bochs (CPU model corei7_skylake_x unless HYMOE_EMU_CPU names another; Bochs 2.7's models with VNNI do not boot
# this kernel: docs/kernels.md) with an initramfs holding a static /init and the static kernel test executable, reads
# their report from the emulated serial port and fails unless hymoe detected AVX-512 by itself and every AVX-512
# test ran and passed. Emulation proves correctness only; its speed says nothing about the kernels' speed.
#
# Installs its packages through scripts/setup.sh (only the missing ones); the kernel image is fetched
# with `apt-get download` and unpacked under build/, never installed. Everything it makes lies in build/avx512-emu.
# HYMOE_EMU_GTEST_FILTER narrows the tests (a gtest filter). By default every test runs but the avx2 instances of
# the per-ISA suites, which the native run covers, the fp8/mxfp4 grouped-FFN reference sweep and the GGUF int8
# suites: the AVX-512F table runs mxfp4 and the GGUF formats with the AVX2 kernels the native run tests (the emulated
# CPU has no VNNI, so the VNNI int8 kernels are checked by the software model of EmulatedIsaTest instead), its own fp8
# kernel by the micro-kernel tests and QuantFormatTest.ExactFp8HasTheBitsOfTheAvx2Kernel, their AVX-512 driver path
# by the exact GGUF sweep's one case per panel form and QuantFormatTest.IdenticalBitsForOneAndTwoThreads, and those
# sweeps (and the GGUF sweep's further types, GroupedFfnMatchesTheReferenceInEveryType, whose micro-kernels the
# micro-kernel test runs) alone outlast the emulator's time limit; and the suites that run no ISA's code (the
# software models of EmulatedIsaTest, the GGUF encoders and packers), which the native run covers on every CPU.
# HYMOE_EMU_TIMEOUT_S bounds the emulation (1200 s).
set -euo pipefail
cd "$(dirname "$0")/.."

cpu_model=${HYMOE_EMU_CPU:-corei7_skylake_x}
timeout_s=${HYMOE_EMU_TIMEOUT_S:-1200}
gtest_filter=${HYMOE_EMU_GTEST_FILTER--*/avx2:Isas/QuantFormatTest.GroupedFfnMatchesTheReference/*:Isas/GgufKernelTest.GroupedFfnMatchesTheReferenceInEveryType/*:*GgufInt8*:*Mxfp4Int8*:EmulatedIsaTest.*:GgufEncode.*:GgufPack.*}
work=$PWD/build/avx512-emu
script_start=$(date +%s)

sudo_cmd=""
[ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"

# bochs-term is the display plugin: Debian builds Bochs without the 'nogui' one, and naming a GUI here also keeps
# apt from choosing bochs-wx for bochs's GUI dependency.
bash scripts/setup.sh bochs bochsbios bochs-term vgabios isolinux syslinux-common genisoimage cpio procps

# The guest kernel: Debian's cloud amd64 image. It has the 8250 serial console, initramfs and devtmpfs built in,
# enables the AVX-512 state in XCR0 on a CPU that has it, and unlike the generic image it is LZ4-compressed (seconds
# to unpack under emulation, where the generic image's XZ takes two minutes) with few drivers to initialize.
# Only its vmlinuz is kept.
mkdir -p "$work/kernel"
kernel=$(find "$work/kernel" -name 'vmlinuz-*-cloud-amd64' -print -quit)
if [ -z "$kernel" ]; then
  kpkg=$(apt-cache depends linux-image-cloud-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
  if [ -z "$kpkg" ]; then
    $sudo_cmd apt-get update -qq
    kpkg=$(apt-cache depends linux-image-cloud-amd64 | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
  fi
  echo "avx512-emu: downloading $kpkg (for its vmlinuz only)"
  tmp=$(mktemp -d)
  # (As root apt warns that it downloads unsandboxed; show its messages only if the download fails.)
  (cd "$tmp" && apt-get download -qq "$kpkg" 2>"$tmp/apt.err") || { cat "$tmp/apt.err"; exit 1; }
  dpkg-deb --fsys-tarfile "$tmp"/"$kpkg"_*.deb | tar -x -C "$work/kernel" --wildcards --strip-components=2 './boot/vmlinuz-*'
  rm -rf "$tmp"
  kernel=$(find "$work/kernel" -name 'vmlinuz-*-cloud-amd64' -print -quit)
fi

cmake --preset release >/dev/null
cmake --build --preset release --target hymoe_kernel_tests_static hymoe_emulation_init

# initramfs: /init, the tests, and the mount points /init uses.
rm -rf "$work/root" "$work/iso"
mkdir -p "$work/root/dev" "$work/root/proc" "$work/iso/isolinux"
cp build/release/tests/kernels/hymoe_emulation_init "$work/root/init"
cp build/release/tests/kernels/hymoe_kernel_tests_static "$work/root/"
(cd "$work/root" && find . | cpio -o -H newc -R 0:0 --quiet | gzip -1 >"$work/iso/initrd.img")

# Kernel command line: clearcpuid=xsaves,xsavec because Bochs 2.7 reports the standard-format XSAVE size in
# CPUID(0xD,1).EBX where the compacted one belongs (2688 bytes, not 2432); the kernel's consistency check then
# turns XSAVE off and with it every AVX feature ("XSAVE consistency problem: size 2432 != kernel_size 2688").
# Without XSAVES and XSAVEC the kernel keeps the standard format, whose size Bochs reports correctly. Unknown
# NAME=value words reach /init's environment, and through it the tests'. cryptomgr.notests skips the crypto
# self-tests, 20 s of emulation otherwise.
cp "$kernel" "$work/iso/vmlinuz"
cp /usr/lib/ISOLINUX/isolinux.bin /usr/lib/syslinux/modules/bios/ldlinux.c32 "$work/iso/isolinux/"
cat >"$work/iso/isolinux/isolinux.cfg" <<EOF
DEFAULT hymoe
PROMPT 0
LABEL hymoe
  KERNEL /vmlinuz
  INITRD /initrd.img
  APPEND console=ttyS0,115200 quiet clearcpuid=xsaves,xsavec cryptomgr.notests mitigations=off GTEST_COLOR=no ${gtest_filter:+GTEST_FILTER=$gtest_filter}
EOF
genisoimage -quiet -o "$work/boot.iso" -b isolinux/isolinux.bin -c isolinux/boot.cat -no-emul-boot \
  -boot-load-size 4 -boot-info-table -R "$work/iso"

# clock sync=none: the guest's time advances with the instructions it executes, so a slow host only makes the
# run longer, never makes the guest miss timers. Debian's Bochs has its debugger built in, which stops before the
# first instruction: debugger.rc continues.
cat >"$work/bochsrc" <<EOF
megs: 256
cpu: model=$cpu_model, count=1, ips=50000000
romimage: file=/usr/share/bochs/BIOS-bochs-latest
vgaromimage: file=/usr/share/vgabios/vgabios.bin
pci: enabled=1, chipset=i440fx
ata0-master: type=cdrom, path=$work/boot.iso, status=inserted
boot: cdrom
com1: enabled=1, mode=file, dev=$work/serial.log
display_library: term
clock: sync=none, time0=utc
log: $work/bochs.log
panic: action=fatal
error: action=report
info: action=report
debug: action=ignore
EOF
printf 'continue\n' >"$work/debugger.rc"

# The term display needs a terminal: script(1) gives Bochs a pseudo-terminal whose output (Bochs' messages) is kept.
# Bochs runs in script's new session, so stopping it means stopping each process of the tree by its id.
kill_tree() {
  local child
  for child in $(pgrep -P "$1" || true); do kill_tree "$child"; done
  kill -KILL "$1" 2>/dev/null || true
}
rm -f "$work/serial.log" "$work/bochs.log"
echo "avx512-emu: booting Linux in Bochs on an emulated $cpu_model (timeout ${timeout_s} s)"
boot_start=$(date +%s)
screen_pid=""
TERM=xterm script -qec "bochs -q -f '$work/bochsrc' -rc '$work/debugger.rc'" /dev/null </dev/null >"$work/bochs.term" 2>&1 &
emu_pid=$!
trap 'kill_tree $emu_pid; [ -z "$screen_pid" ] || kill "$screen_pid" 2>/dev/null' EXIT
tests_start="" tests_end="" timed_out=0
while kill -0 "$emu_pid" 2>/dev/null; do
  sleep 1
  now=$(date +%s)
  if ((now - boot_start > timeout_s)); then timed_out=1; kill_tree "$emu_pid"; break; fi
  # Debian's Bochs has its debugger built in, so the term display draws the guest's screen on a pseudo-terminal of
  # its own ('Bochs connected to screen "/dev/pts/N"') and waits for someone to read it: unread, the terminal's
  # buffer fills after some minutes of guest screen updates and Bochs blocks in its write, the guest frozen
  # mid-test. Read it (raw, no echo) and discard it.
  if [ -z "$screen_pid" ]; then
    screen=$(sed -n 's/.*Bochs connected to screen "\(\/dev\/pts\/[0-9]*\)".*/\1/p' "$work/bochs.term" | head -1)
    if [ -n "$screen" ]; then
      stty -F "$screen" raw -echo 2>/dev/null || true
      cat "$screen" >/dev/null 2>&1 &
      screen_pid=$!
    fi
  fi
  [ -f "$work/serial.log" ] || continue
  if [ -z "$tests_start" ] && grep -q '^hymoe-emu: running' "$work/serial.log"; then tests_start=$now; fi
  if [ -z "$tests_end" ] && grep -q '^hymoe-emu: tests exit status' "$work/serial.log"; then tests_end=$now; fi
  # Bochs quits at the guest's ACPI power-off; should that ever fail, stop it once the report is complete.
  if [ -n "$tests_end" ] && ((now - tests_end > 30)); then kill_tree "$emu_pid"; fi
done
wait "$emu_pid" 2>/dev/null || true
[ -z "$screen_pid" ] || kill "$screen_pid" 2>/dev/null || true
trap - EXIT
emu_end=$(date +%s)

# The guest's tty turns each newline into CR LF.
log=$work/serial.txt
touch "$work/serial.log"
tr -d '\r' <"$work/serial.log" >"$log"
field() { sed -n "s/^hymoe-emu: $1//p" "$log" | head -1; }
detected=$(field 'detect_best_isa=' | cut -d' ' -f1)
exit_status=$(field 'tests exit status ')
passed=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) tests\?\./\1/p' "$log" | head -1)
ran_avx512=$(grep -cE '^\[       OK \] .*/avx512 \(' "$log" || true)
skipped_avx512=$(grep -cE '^\[  SKIPPED \] .*/avx512 \(' "$log" || true)
failed=$(grep -cE '^\[  FAILED  \] .* \([0-9]+ ms\)$' "$log" || true)

echo "== avx512-emu summary"
echo "emulated CPU:      $cpu_model ($(field 'cpu model name: '))"
echo "guest avx512 flags:$(field 'cpu flags avx512\*:')"
echo "hymoe detected:    ${detected:-?} (nothing forced)"
echo "tests passed:      ${passed:-0}, of them on avx512: $ran_avx512; avx512 skipped: $skipped_avx512; failed: $failed"
echo "tests exit status: ${exit_status:-none}"
[ -n "$tests_start" ] && echo "boot to /init:     $((tests_start - boot_start)) s"
[ -n "$tests_end" ] && echo "tests:             $((tests_end - tests_start)) s"
echo "whole script:      $((emu_end - script_start)) s (Bochs $((emu_end - boot_start)) s); logs in $work"

ok=1
((!timed_out)) || { echo "avx512-emu: FAIL: Bochs still running after ${timeout_s} s"; ok=0; }
[ "$detected" = avx512 ] || { echo "avx512-emu: FAIL: hymoe detected '${detected:-nothing}', not avx512"; ok=0; }
[ "$exit_status" = 0 ] || { echo "avx512-emu: FAIL: tests exit status '${exit_status:-none}'"; ok=0; }
[ -n "$passed" ] && grep -q '^\[  PASSED  \]' "$log" || { echo "avx512-emu: FAIL: no gtest PASSED line"; ok=0; }
((ran_avx512 > 0 && skipped_avx512 == 0 && failed == 0)) || { echo "avx512-emu: FAIL: avx512 tests did not all run and pass"; ok=0; }
if ((!ok)); then
  echo "== last 60 lines of $log"
  tail -60 "$log"
  exit 1
fi
echo "avx512-emu: PASS"
