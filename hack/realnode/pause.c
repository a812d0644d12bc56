/* The pod sandbox's pause process for the local real node (containerd's
 * sandbox_image, see hack/realnode-images.sh): holds the pod's namespaces,
 * reaps the zombies of processes re-parented to it, and exits on SIGTERM or
 * SIGINT. Built static (gcc -static): the image holds nothing else. */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void stop(int sig)
{
	(void)sig;
	_exit(0);
}

static void reap(int sig)
{
	(void)sig;
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
}

int main(void)
{
	struct sigaction sa = { 0 };
	sa.sa_handler = stop;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sa.sa_handler = reap;
	sa.sa_flags = SA_NOCLDSTOP;
	sigaction(SIGCHLD, &sa, NULL);
	for (;;)
		pause();
}
