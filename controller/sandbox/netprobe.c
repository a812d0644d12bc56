#include "sandbox/netprobe.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/jbuild.h"
#include "base/jsonget.h"
#include "sandbox/podbuild.h"

/* Appends {protocol: TCP, port: port} to the array ports. */
static void push_tcp(cJSON *ports, int port)
{
	cJSON *p = jb_obj();
	jb_str(p, "protocol", "TCP");
	jb_num(p, "port", port);
	jb_push(ports, p);
}

/* A policy named name in ns, labelled managed-by, selecting the probe's
 * pods of role, of policyType type (its spec, borrowed, in *spec). */
static cJSON *probe_policy(const char *ns, const char *name, const char *role, const char *type, cJSON **spec)
{
	cJSON *np = jb_obj();
	jb_str(np, "apiVersion", "networking.k8s.io/v1");
	jb_str(np, "kind", "NetworkPolicy");
	cJSON *md = jb_add_obj(np, "metadata");
	jb_str(md, "name", name);
	jb_str(md, "namespace", ns);
	jb_str(jb_add_obj(md, "labels"), SBX_LABEL_MANAGED_BY, SBX_MANAGED_BY);
	*spec = jb_add_obj(np, "spec");
	jb_str(jb_add_obj(jb_add_obj(*spec, "podSelector"), "matchLabels"), SBX_LABEL_NETPROBE, role);
	jb_push_str(jb_add_arr(*spec, "policyTypes"), type);
	return np;
}

cJSON *sbx_netprobe_policy(const char *ns)
{
	cJSON *spec;
	cJSON *np = probe_policy(ns, SBX_NETPROBE_POLICY, "target", "Ingress", &spec);
	cJSON *in = jb_obj();
	cJSON *ports = jb_add_arr(in, "ports");
	push_tcp(ports, SBX_NETPROBE_OPEN);
	push_tcp(ports, SBX_NETPROBE_SHUT_OUT);
	jb_push(jb_add_arr(spec, "ingress"), in);
	return np;
}

cJSON *sbx_netprobe_egress_policy(const char *ns)
{
	cJSON *spec;
	cJSON *np = probe_policy(ns, SBX_NETPROBE_EGRESS_POLICY, "client", "Egress", &spec);
	/* Out to the target pods only: a pod given the client's label gains no
	 * other address. */
	cJSON *out = jb_obj();
	cJSON *peer = jb_obj();
	jb_str(jb_add_obj(jb_add_obj(peer, "podSelector"), "matchLabels"), SBX_LABEL_NETPROBE, "target");
	jb_push(jb_add_arr(out, "to"), peer);
	cJSON *ports = jb_add_arr(out, "ports");
	push_tcp(ports, SBX_NETPROBE_SHUT_IN);
	push_tcp(ports, SBX_NETPROBE_OPEN);
	jb_push(jb_add_arr(spec, "egress"), out);
	return np;
}

static void push_num(cJSON *a, long v)
{
	char n[32];
	snprintf(n, sizeof n, "%ld", v);
	jb_push_str(a, n);
}

cJSON *sbx_netprobe_pod(const char *ns, const char *role, unsigned long round, const char *target_ip,
			const struct sbx_config *cfg, const char *image)
{
	int client = role && !strcmp(role, "client");
	if (!role || (!client && strcmp(role, "target")) || !image || !image[0] ||
	    (client && (!target_ip || strlen(target_ip) > 45)))
		return NULL;
	char name[64];
	snprintf(name, sizeof name, SBX_NETPROBE_PREFIX "%s-%lu", role, round);
	cJSON *pod = jb_obj();
	jb_str(pod, "apiVersion", "v1");
	jb_str(pod, "kind", "Pod");
	cJSON *md = jb_add_obj(pod, "metadata");
	jb_str(md, "name", name);
	jb_str(md, "namespace", ns);
	cJSON *labels = jb_add_obj(md, "labels");
	jb_str(labels, SBX_LABEL_MANAGED_BY, SBX_MANAGED_BY);
	jb_str(labels, SBX_LABEL_NAME, "sandbox-netprobe");
	jb_str(labels, SBX_LABEL_NETPROBE, role);
	cJSON *ps = jb_add_obj(pod, "spec");
	jb_str(ps, "restartPolicy", "Never");
	jb_bool(ps, "automountServiceAccountToken", 0);
	jb_bool(ps, "enableServiceLinks", 0);
	jb_num(ps, "activeDeadlineSeconds", 2 * SBX_NETPROBE_TRY_S + 60);
	jb_num(ps, "terminationGracePeriodSeconds", 1);
	cJSON *psc = jb_add_obj(ps, "securityContext");
	jb_bool(psc, "runAsNonRoot", 1);
	jb_num(psc, "runAsUser", cfg->pod.run_as_user);
	jb_num(psc, "runAsGroup", cfg->pod.run_as_group);
	jb_str(jb_add_obj(psc, "seccompProfile"), "type", "RuntimeDefault");
	if (cfg->pod.runtime_default)
		jb_str(ps, "runtimeClassName", cfg->pod.runtime_default);
	cJSON *cmd, *sc;
	jb_push(jb_add_arr(ps, "containers"), sbx_pod_tool_container("probe", image, "net-probe", "32Mi", &cmd, &sc));
	if (client) {
		jb_push_str(cmd, "connect");
		jb_push_str(cmd, target_ip);
		push_num(cmd, SBX_NETPROBE_SHUT_IN);
		push_num(cmd, SBX_NETPROBE_SHUT_OUT);
		push_num(cmd, SBX_NETPROBE_OPEN);
		push_num(cmd, SBX_NETPROBE_TRY_S);
	} else {
		jb_push_str(cmd, "listen");
		push_num(cmd, SBX_NETPROBE_SHUT_IN);
		push_num(cmd, SBX_NETPROBE_OPEN);
		push_num(cmd, SBX_NETPROBE_SHUT_OUT);
	}
	jb_bool(sc, "runAsNonRoot", 1);
	jb_push_str(jb_add_arr(jb_add_obj(sc, "capabilities"), "drop"), "ALL");
	/* Where sandbox pods run: the operator's node selector, tolerations,
	 * priority class, pull secrets (its labels and annotations too). */
	sbx_pod_add_operator_settings(pod, ps, &cfg->pod);
	return pod;
}

/* The client's exit code, or -1 while it has none. */
static int exit_code(const cJSON *client)
{
	const cJSON *st = jobj(client, "status");
	const cJSON *cs = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(st, "containerStatuses"), 0);
	const cJSON *code = cJSON_GetObjectItemCaseSensitive(jobj(jobj(cs, "state"), "terminated"), "exitCode");
	return cJSON_IsNumber(code) && code->valueint >= 0 ? code->valueint : -1;
}

unsigned sbx_netprobe_unenforced(const cJSON *client)
{
	switch (exit_code(client)) {
	case SBX_NETPROBE_EXIT_OPEN:
		return SBX_NETPROBE_INGRESS | SBX_NETPROBE_EGRESS;
	case SBX_NETPROBE_EXIT_INGRESS:
		return SBX_NETPROBE_INGRESS;
	case SBX_NETPROBE_EXIT_EGRESS:
		return SBX_NETPROBE_EGRESS;
	default:
		return 0;
	}
}

enum sbx_netprobe_result sbx_netprobe_verdict(const cJSON *client, int *done, char *why, size_t n)
{
	*done = 0;
	if (n)
		why[0] = '\0';
	const cJSON *st = jobj(client, "status");
	const char *phase = jstr(st, "phase");
	int code = exit_code(client);
	if (code < 0) {
		if (phase && !strcmp(phase, "Failed")) { /* e.g. its deadline, before it ran */
			*done = 1;
			snprintf(why, n, "the probe's client pod failed: %.200s",
				 jstr(st, "message") ? jstr(st, "message") : jstr(st, "reason") ? jstr(st, "reason")
												: "?");
		}
		return SBX_NETPROBE_UNKNOWN;
	}
	*done = 1;
	switch (code) {
	case 0:
		snprintf(why, n, "NetworkPolicy is enforced on ingress and egress: a pod's ports denied by either were "
				 "unreachable, one allowed by both was reachable");
		return SBX_NETPROBE_ENFORCED;
	case SBX_NETPROBE_EXIT_OPEN:
		snprintf(why, n, "a pod's ports denied by a NetworkPolicy's ingress rules and by its egress rules stayed "
				 "reachable for %d s: the cluster enforces NetworkPolicy neither on ingress nor on egress",
			 SBX_NETPROBE_TRY_S);
		return SBX_NETPROBE_NOT_ENFORCED;
	case SBX_NETPROBE_EXIT_INGRESS:
	case SBX_NETPROBE_EXIT_EGRESS: {
		int in = code == SBX_NETPROBE_EXIT_INGRESS;
		snprintf(why, n, "a pod's port denied only by a NetworkPolicy's %s rules stayed reachable for %d s (one "
				 "denied only by its %s rules did not): the cluster does not enforce NetworkPolicy on %s",
			 in ? "ingress" : "egress", SBX_NETPROBE_TRY_S, in ? "egress" : "ingress", in ? "ingress" : "egress");
		return SBX_NETPROBE_NOT_ENFORCED;
	}
	case SBX_NETPROBE_EXIT_NONET:
		snprintf(why, n, "the probe's pods could not reach each other on an allowed port");
		return SBX_NETPROBE_UNKNOWN;
	default:
		snprintf(why, n, "the probe's client exited with code %d", code);
		return SBX_NETPROBE_UNKNOWN;
	}
}

/* ---- the subcommand ---- */

static int port_arg(const char *s)
{
	char *end;
	long v = strtol(s, &end, 10);
	return *s && !*end && v > 0 && v < 65536 ? (int)v : -1;
}

/* Accepts and closes connections on every port until killed. */
static int listen_main(int argc, char **argv)
{
	struct pollfd fds[8];
	int n = 0;
	for (int i = 0; i < argc && n < 8; i++) {
		int port = port_arg(argv[i]), one = 1;
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)(port > 0 ? port : 0)) };
		if (port < 0 || fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
		    bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || listen(fd, 16) < 0) {
			fprintf(stderr, "net-probe: cannot listen on %s: %s\n", argv[i], strerror(errno));
			return 2;
		}
		fds[n].fd = fd;
		fds[n++].events = POLLIN;
	}
	if (!n) {
		fprintf(stderr, "net-probe: listen PORT...\n");
		return 2;
	}
	printf("listening\n");
	fflush(stdout);
	for (;;) {
		if (poll(fds, (nfds_t)n, -1) < 0 && errno != EINTR)
			return 2;
		for (int i = 0; i < n; i++)
			if (fds[i].revents & POLLIN) {
				int c = accept(fds[i].fd, NULL, NULL);
				if (c >= 0)
					close(c);
			}
	}
}

/* 1 when a TCP connection to ip:port is accepted within 1 s. */
static int reaches(const char *ip, int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	if (inet_pton(AF_INET, ip, &a.sin_addr) != 1)
		return 0;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return 0;
	int ok = 0;
	if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) {
		ok = 1;
	} else if (errno == EINPROGRESS) {
		struct pollfd p = { .fd = fd, .events = POLLOUT };
		int err = 0;
		socklen_t len = sizeof err;
		ok = poll(&p, 1, 1000) == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0;
	}
	close(fd);
	return ok;
}

/* Exits 0 once the open port answers and neither shut one does; at the end,
 * by the last try, which shut port(s) still answered (see netprobe.h). */
static int connect_main(int argc, char **argv)
{
	int shut_in, shut_out, open_port;
	long secs;
	if (argc != 5 || (shut_in = port_arg(argv[1])) < 0 || (shut_out = port_arg(argv[2])) < 0 ||
	    (open_port = port_arg(argv[3])) < 0 || (secs = strtol(argv[4], NULL, 10)) <= 0 || secs > 600) {
		fprintf(stderr, "net-probe: connect IP SHUT_IN_PORT SHUT_OUT_PORT OPEN_PORT SECONDS\n");
		return 2;
	}
	int open_seen = 0, in_seen = 0, out_seen = 0;
	for (long i = 0; i < secs; i++) {
		time_t t0 = time(NULL);
		int o = reaches(argv[0], open_port), si = reaches(argv[0], shut_in), so = reaches(argv[0], shut_out);
		open_seen |= o;
		in_seen = si;
		out_seen = so;
		printf("try %ld: open port %s, port denied on ingress %s, port denied on egress %s\n", i + 1,
		       o ? "reached" : "not reached", si ? "reached" : "not reached", so ? "reached" : "not reached");
		fflush(stdout);
		if (o && !si && !so)
			return 0;
		if (time(NULL) == t0)
			sleep(1);
	}
	if (!open_seen)
		return SBX_NETPROBE_EXIT_NONET;
	if (in_seen && out_seen)
		return SBX_NETPROBE_EXIT_OPEN;
	if (in_seen)
		return SBX_NETPROBE_EXIT_INGRESS;
	return out_seen ? SBX_NETPROBE_EXIT_EGRESS : SBX_NETPROBE_EXIT_NONET;
}

int sbx_netprobe_main(int argc, char **argv)
{
	signal(SIGPIPE, SIG_IGN);
	if (argc >= 2 && !strcmp(argv[1], "listen"))
		return listen_main(argc - 2, argv + 2);
	if (argc >= 2 && !strcmp(argv[1], "connect"))
		return connect_main(argc - 2, argv + 2);
	fprintf(stderr, "usage: sandbox-controller net-probe listen PORT... | connect IP SHUT_IN SHUT_OUT OPEN SECONDS\n");
	return 2;
}
