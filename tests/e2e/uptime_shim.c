/* LD_PRELOAD shim for the end-to-end tests: sysinfo() reports an uptime of 0.
 * slurmd sends its boot time (now - uptime) when it registers; slurmctld keeps a resumed cloud
 * node "still waiting for boot" while that boot time is older than the resume request. A slurmd
 * started on a long-running test machine must therefore look freshly booted. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <sys/sysinfo.h>

int sysinfo(struct sysinfo *info) {
    static int (*real_sysinfo)(struct sysinfo *) = 0;
    if (!real_sysinfo)
        real_sysinfo = (int (*)(struct sysinfo *))dlsym(RTLD_NEXT, "sysinfo");
    int rc = real_sysinfo(info);
    if (rc == 0)
        info->uptime = 0;
    return rc;
}
