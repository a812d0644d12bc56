#include "sandbox/wsinit.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandbox/wsprep.h"

/* The largest uid or gid accepted (as the config's ids). */
#define ID_MAX 2147483647L

int sbx_wsinit_dir(const char *path, long uid, long gid, int *changed, char *err, size_t errlen)
{
	*changed = 0;
	/* O_NOFOLLOW|O_DIRECTORY: the folder itself, never where a link leads. */
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	struct stat st;
	int rc = -1;
	if (fstat(fd, &st) < 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		goto out;
	}
	if ((long)st.st_uid != uid || (long)st.st_gid != gid) {
		if (fchown(fd, (uid_t)uid, (gid_t)gid) < 0 || fchmod(fd, SBX_WSPREP_MODE) < 0) {
			snprintf(err, errlen, "%s: giving it to %ld:%ld: %s", path, uid, gid, strerror(errno));
			goto out;
		}
		*changed = 1;
	} else if ((st.st_mode & 0700) != 0700) {
		if (fchmod(fd, (st.st_mode & 07777) | 0700) < 0) {
			snprintf(err, errlen, "%s: chmod: %s", path, strerror(errno));
			goto out;
		}
		*changed = 1;
	}
	rc = 0;
out:
	close(fd);
	return rc;
}

/* Parses an id in 1..ID_MAX; -1 when malformed. */
static long parse_id(const char *s)
{
	char *end;
	errno = 0;
	long v = s && *s ? strtol(s, &end, 10) : -1;
	if (!s || !*s || errno || *end || v < 1 || v > ID_MAX)
		return -1;
	return v;
}

int sbx_wsinit_main(int argc, char **argv)
{
	long uid = -1, gid = -1;
	int i = 1;
	for (; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--uid"))
			uid = parse_id(argv[i + 1]);
		else if (!strcmp(argv[i], "--gid"))
			gid = parse_id(argv[i + 1]);
		else
			break;
	}
	if (uid < 0 || gid < 0 || i >= argc) {
		fprintf(stderr, "usage: sandbox-controller workspace-init --uid UID --gid GID FOLDER...\n"
				"  gives each FOLDER to UID:GID (1..%ld) unless it is theirs already\n",
			ID_MAX);
		return 2;
	}
	int status = 0;
	for (; i < argc; i++) {
		char err[512];
		int changed;
		if (sbx_wsinit_dir(argv[i], uid, gid, &changed, err, sizeof err) < 0) {
			fprintf(stderr, "workspace-init: %s\n", err);
			status = 1;
			continue;
		}
		printf("workspace-init: %s %s %ld:%ld\n", argv[i], changed ? "given to" : "already", uid, gid);
	}
	return status;
}
