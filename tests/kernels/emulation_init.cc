// PID 1 of the initramfs that scripts/avx512_under_emulation.sh boots on an emulated AVX-512 CPU: reports the
// CPU the guest kernel sees and the ISA hymoe detects on it (nothing forced), runs /hymoe_kernel_tests_static
// in the environment the kernel gave init (the command line's unknown NAME=value words, e.g. GTEST_FILTER), prints
// the tests' exit status on the serial console and powers the machine off. Linux only; uses nothing of hymoe but the ISA detection. The script parses
// the lines starting with "hymoe-emu:".
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "kernels/isa/isa.h"

namespace {

constexpr const char* kTests = "/hymoe_kernel_tests_static";

// The kernel's console is ttyS0 (console=ttyS0), but the initramfs has no /dev/console node to inherit, so PID 1
// starts without stdio: mount devtmpfs and open the serial port ourselves.
void attach_serial_console() {
  mkdir("/dev", 0755);
  mount("devtmpfs", "/dev", "devtmpfs", 0, nullptr);
  const int fd = open("/dev/ttyS0", O_RDWR | O_NOCTTY);
  if (fd < 0) return;
  for (int i = 0; i < 3; ++i) dup2(fd, i);
  if (fd > 2) close(fd);
}

// "model name" and the AVX-512 flags the guest kernel reports: what the emulated CPUID and XCR0 amount to.
void report_cpu() {
  mkdir("/proc", 0755);
  mount("proc", "/proc", "proc", 0, nullptr);
  std::ifstream in("/proc/cpuinfo");
  std::string line, model = "?", avx512 = "";
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0 && model == "?") model = line.substr(line.find(':') + 2);
    if (line.rfind("flags", 0) == 0 && avx512.empty()) {
      for (size_t at = line.find(" avx512"); at != std::string::npos; at = line.find(" avx512", at + 1))
        avx512 += line.substr(at, line.find(' ', at + 1) - at);
      if (avx512.empty()) avx512 = " none";
    }
  }
  std::printf("hymoe-emu: cpu model name: %s\n", model.c_str());
  std::printf("hymoe-emu: cpu flags avx512*:%s\n", avx512.c_str());
}

int run_tests() {
  std::fflush(stdout);
  const pid_t pid = fork();
  if (pid == 0) {
    char* args[] = {const_cast<char*>(kTests), nullptr};
    execve(kTests, args, environ);
    std::printf("hymoe-emu: cannot exec %s: %s\n", kTests, std::strerror(errno));
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status)) {
    std::printf("hymoe-emu: tests killed by signal %d (%s)\n", WTERMSIG(status), strsignal(WTERMSIG(status)));
    return 128 + WTERMSIG(status);
  }
  return WEXITSTATUS(status);
}

}  // namespace

int main() {
  attach_serial_console();
  report_cpu();
  // The script puts no HYMOE_ISA on the command line, so this is detection alone: CPUID, and XGETBV as the guest
  // kernel set XCR0.
  namespace k = hymoe::kernels;
  std::printf("hymoe-emu: detect_best_isa=%s active_isa=%s\n", std::string(k::isa_name(k::detect_best_isa())).c_str(),
              std::string(k::isa_name(k::active_isa())).c_str());
  std::printf("hymoe-emu: running %s\n", kTests);
  const int code = run_tests();
  std::printf("hymoe-emu: tests exit status %d\n", code);
  std::fflush(stdout);
  tcdrain(STDOUT_FILENO);  // the tty layer still holds unsent output, and powering off would drop it
  sync();
  reboot(RB_POWER_OFF);
  for (;;) pause();  // PID 1 must not exit: the kernel would panic instead of powering off
}
