/* monitor.h - `tierctl monitor` (monitor.c): watch mounted arrays, log
 * events and run a program for them.  tierctl.c's main only dispatches. */
#ifndef TIERCTL_MONITOR_H
#define TIERCTL_MONITOR_H

/* argv[0] is "monitor", the rest its mount points and options.  Returns
 * tierctl's exit status: 0, 1 (something needs attention, or nothing
 * could be watched), 2 (usage). */
int tierctl_monitor(int argc, char **argv);

#endif
