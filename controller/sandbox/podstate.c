#include "sandbox/podstate.h"

#include <stdio.h>
#include <string.h>

#include "base/jsonget.h"

/* Longest part of a pod's status copied into a phrase. */
#define PART_MAX 300

/* The status entry of container name (NULL: the first) in pod.status.containerStatuses. */
static const cJSON *container_status(const cJSON *pod, const char *name)
{
	const cJSON *cs;
	cJSON_ArrayForEach(cs, jobj(jobj(pod, "status"), "containerStatuses"))
	{
		const char *n = jstr(cs, "name");
		if (!name || (n && !strcmp(n, name)))
			return cs;
	}
	return NULL;
}

/* The condition of type t in pod.status.conditions, or NULL. */
static const cJSON *pod_condition(const cJSON *pod, const char *t)
{
	const cJSON *c;
	cJSON_ArrayForEach(c, jobj(jobj(pod, "status"), "conditions"))
	{
		const char *ty = jstr(c, "type");
		if (ty && !strcmp(ty, t))
			return c;
	}
	return NULL;
}

/* ": msg" when msg is a non-empty string, else "". */
static const char *colon(const char *msg)
{
	return msg && *msg ? ": " : "";
}

const char *sbx_pod_why(const cJSON *pod, const char *container, char *out, size_t n)
{
	if (!n)
		return out;
	out[0] = '\0';
	const cJSON *cs = container_status(pod, container);
	const char *cname = cs ? jstr(cs, "name") : NULL;
	const cJSON *term = jobj(jobj(cs, "state"), "terminated");
	const cJSON *wait = jobj(jobj(cs, "state"), "waiting");
	if (term) {
		const cJSON *code = jobj(term, "exitCode");
		const char *reason = jstr(term, "reason"), *msg = jstr(term, "message");
		snprintf(out, n, "container %.63s exited with code %d (%.*s)%s%.*s", cname ? cname : "?",
			 cJSON_IsNumber(code) ? code->valueint : -1, PART_MAX, reason ? reason : "no reason",
			 colon(msg), PART_MAX, msg ? msg : "");
		return out;
	}
	if (wait && jstr(wait, "reason")) {
		const char *msg = jstr(wait, "message");
		snprintf(out, n, "container %.63s is waiting: %.*s%s%.*s", cname ? cname : "?", PART_MAX,
			 jstr(wait, "reason"), colon(msg), PART_MAX, msg ? msg : "");
		return out;
	}
	const cJSON *sched = pod_condition(pod, "PodScheduled");
	const char *ss = jstr(sched, "status");
	if (ss && !strcmp(ss, "False")) {
		const char *msg = jstr(sched, "message"), *reason = jstr(sched, "reason");
		snprintf(out, n, "not scheduled: %.*s", PART_MAX, msg && *msg ? msg : reason ? reason : "no reason");
		return out;
	}
	const char *reason = jstr(jobj(pod, "status"), "reason"), *msg = jstr(jobj(pod, "status"), "message");
	if (reason && *reason)
		snprintf(out, n, "%.*s%s%.*s", PART_MAX, reason, colon(msg), PART_MAX, msg ? msg : "");
	return out;
}
