#include "base/fault.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int listed(const char *list, const char *name)
{
	size_t n = strlen(name);
	for (const char *p = list; p && *p;) {
		const char *e = strchr(p, ',');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		if (len == n && !strncmp(p, name, n))
			return 1;
		p = e ? e + 1 : NULL;
	}
	return 0;
}

void fault_point(const char *name)
{
	const char *list = getenv("SBX_FAULT_POINTS");
	if (!list || !listed(list, name))
		return;
	const char *once = getenv("SBX_FAULT_ONCE_FILE");
	if (once) {
		int fd = open(once, O_CREAT | O_EXCL | O_WRONLY, 0644);
		if (fd < 0)
			return; /* already fired once */
		dprintf(fd, "%s\n", name);
		close(fd);
	}
	fprintf(stderr, "{\"level\":\"error\",\"msg\":\"fault point reached, killing self\",\"point\":\"%s\"}\n",
		name);
	fflush(stderr);
	raise(SIGKILL);
}

void fault_delay(const char *name)
{
	const char *list = getenv("SBX_FAULT_DELAYS");
	size_t n = strlen(name);
	for (const char *p = list; p && *p;) {
		const char *e = strchr(p, ','), *eq = strchr(p, '=');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		if (eq && eq < p + len && (size_t)(eq - p) == n && !strncmp(p, name, n)) {
			long ms = strtol(eq + 1, NULL, 10);
			struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
			if (ms > 0)
				nanosleep(&ts, NULL);
			return;
		}
		p = e ? e + 1 : NULL;
	}
}
