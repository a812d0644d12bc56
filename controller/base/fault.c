#include "base/fault.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* In the comma list, the first entry that is name (valued 0) or "name=..."
 * (valued 1): a pointer just past name in it, or NULL. */
static const char *entry(const char *list, const char *name, int valued)
{
	size_t n = strlen(name);
	for (const char *p = list; p && *p;) {
		const char *e = strchr(p, ',');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		if (len >= n && !strncmp(p, name, n) && (valued ? len > n && p[n] == '=' : len == n))
			return p + n;
		p = e ? e + 1 : NULL;
	}
	return NULL;
}

void fault_point(const char *name)
{
	const char *list = getenv("SBX_FAULT_POINTS");
	if (!entry(list, name, 0))
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
	const char *eq = entry(getenv("SBX_FAULT_DELAYS"), name, 1);
	long ms = eq ? strtol(eq + 1, NULL, 10) : 0;
	if (ms <= 0)
		return;
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	fprintf(stderr, "{\"level\":\"info\",\"msg\":\"fault delay\",\"point\":\"%s\",\"ms\":%ld}\n", name, ms);
	nanosleep(&ts, NULL);
}
