/* `sandbox-controller workspace-init --uid UID --gid GID FOLDER...`: what the
 * workspace preparation pod runs (sandbox/wsprep.h). Each FOLDER is one of
 * the owner's folders mounted into that pod; a folder not yet uid:gid's is
 * given to uid:gid with mode SBX_WSPREP_MODE (the kubelet made it root's,
 * 0755), one already theirs keeps its mode (owner rwx added if missing).
 * Nothing inside a folder is touched, no link is followed, and running it
 * twice changes nothing more: it is safe after a crash or on two replicas'
 * pods. */
#ifndef SBX_SANDBOX_WSINIT_H
#define SBX_SANDBOX_WSINIT_H

#include <stddef.h>

/* Hands the folder at path over to uid:gid as above. Returns 0 with *changed
 * 1 when it changed anything, or -1 with a message in err (size errlen). */
int sbx_wsinit_dir(const char *path, long uid, long gid, int *changed, char *err, size_t errlen);

/* The subcommand; argv[0] is "workspace-init". Prints a line per folder to
 * stdout, errors to stderr; returns the exit status (0, 1 on a failed
 * folder, 2 on bad arguments). */
int sbx_wsinit_main(int argc, char **argv);

#endif
