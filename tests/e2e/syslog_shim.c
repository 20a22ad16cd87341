/* LD_PRELOAD library: syslog(3) lines into the file named by $GPUCLUSTER_SYSLOG_FILE (there is no /dev/log on
 * a test machine, and a test must not touch the host's): how the people tests read pam_slurm_adopt's, pam_access's
 * and pam_sss's own log lines. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <syslog.h>

static void out(int pri, const char *fmt, va_list ap) {
  const char *path = getenv("GPUCLUSTER_SYSLOG_FILE");
  FILE *f = path ? fopen(path, "a") : NULL;
  if (!f) return;
  fprintf(f, "<%d> ", pri);
  vfprintf(f, fmt, ap);
  fputc('\n', f);
  fclose(f);
}
void vsyslog(int pri, const char *fmt, va_list ap) { out(pri, fmt, ap); }
void __vsyslog_chk(int pri, int flag, const char *fmt, va_list ap) { (void)flag; out(pri, fmt, ap); }
void syslog(int pri, const char *fmt, ...) { va_list ap; va_start(ap, fmt); out(pri, fmt, ap); va_end(ap); }
void __syslog_chk(int pri, int flag, const char *fmt, ...) {
  va_list ap; (void)flag; va_start(ap, fmt); out(pri, fmt, ap); va_end(ap);
}
void openlog(const char *ident, int option, int facility) { (void)ident; (void)option; (void)facility; }
void closelog(void) {}
