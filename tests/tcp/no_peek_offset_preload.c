// LD_PRELOAD shim: the kernel of a stock Debian 12 (Linux 6.1) in a process running on a newer one.
// TCP continues a peek behind the last one (SO_PEEK_OFF) only from Linux 6.10; before, setting it on a
// TCP socket fails with EOPNOTSUPP and StreamPath keeps its older way of dropping peeked frames. This
// refuses SO_PEEK_OFF the way 6.1 does, so the whole plugin runs that way here too, and counts the
// refusals: a run that never asked proved nothing about that mode.
//   FF_NO_PEEK_OFF_REPORT=FILE: at exit, the number of refused calls is written to FILE.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>

static atomic_long refused;

int setsockopt(int fd, int level, int name, const void* value, socklen_t len) {
  static int (*real)(int, int, int, const void*, socklen_t);
  if (level == SOL_SOCKET && name == SO_PEEK_OFF) {
    int type = 0;
    socklen_t tl = sizeof(type);
    // Only stream sockets: 6.1 has peek offsets for UDP and Unix sockets.
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) == 0 && type == SOCK_STREAM) {
      atomic_fetch_add(&refused, 1);
      errno = EOPNOTSUPP;
      return -1;
    }
  }
  if (real == NULL) real = (int (*)(int, int, int, const void*, socklen_t))dlsym(RTLD_NEXT, "setsockopt");
  if (real == NULL) {
    errno = ENOSYS;
    return -1;
  }
  return real(fd, level, name, value, len);
}

__attribute__((destructor)) static void report(void) {
  const char* path = getenv("FF_NO_PEEK_OFF_REPORT");
  if (path == NULL || *path == '\0') return;
  // Appended: a launcher's child processes each add their own line.
  FILE* f = fopen(path, "a");
  if (f == NULL) return;
  fprintf(f, "%ld\n", atomic_load(&refused));
  fclose(f);
}
