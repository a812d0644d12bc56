#include "sandbox/podstate.h"

#include <stdio.h>
#include <string.h>

#include "base/jbuild.h"
#include "base/jsonget.h"

#define PART_MAX SBX_POD_WHY_PART

/* The status entry of container name (NULL: the first) in a pod status's
 * containerStatuses. */
static const cJSON *container_status(const cJSON *st, const char *name)
{
	const cJSON *cs;
	cJSON_ArrayForEach(cs, jobj(st, "containerStatuses"))
	{
		const char *n = jstr(cs, "name");
		if (!name || (n && !strcmp(n, name)))
			return cs;
	}
	return NULL;
}

/* The condition of type t in a pod status's conditions, or NULL. */
static const cJSON *pod_condition(const cJSON *st, const char *t)
{
	const cJSON *c;
	cJSON_ArrayForEach(c, jobj(st, "conditions"))
	{
		const char *ty = jstr(c, "type");
		if (ty && !strcmp(ty, t))
			return c;
	}
	return NULL;
}

int sbx_utf8_cut(const char *s, int max)
{
	int n = 0;
	while (n < max && s[n])
		n++;
	if (s[n]) /* cut: never inside a character */
		while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
			n--;
	return n;
}

/* ": " when msg is not empty, else "". */
static const char *colon(const char *msg)
{
	return *msg ? ": " : "";
}

/* s, or dflt when s is NULL. */
static const char * or (const char *s, const char *dflt)
{
	return s ? s : dflt;
}

int sbx_pod_finished(const cJSON *pod)
{
	const char *phase = jstr(jobj(pod, "status"), "phase");
	return phase && (!strcmp(phase, "Succeeded") || !strcmp(phase, "Failed"));
}

const char *sbx_pod_why(const cJSON *pod, const char *container, char *out, size_t n)
{
	if (!n)
		return out;
	out[0] = '\0';
	const cJSON *st = jobj(pod, "status");
	const cJSON *cs = container_status(st, container);
	const char *cname = or (jstr(cs, "name"), "?");
	const cJSON *term = jobj(jobj(cs, "state"), "terminated");
	const cJSON *wait = jobj(jobj(cs, "state"), "waiting");
	if (term) {
		const cJSON *code = jobj(term, "exitCode");
		const char *reason = or (jstr(term, "reason"), "no reason"), *msg = or (jstr(term, "message"), "");
		snprintf(out, n, "container %.*s exited with code %d (%.*s)%s%.*s", sbx_utf8_cut(cname, 63), cname,
			 cJSON_IsNumber(code) ? code->valueint : -1, sbx_utf8_cut(reason, PART_MAX), reason, colon(msg),
			 sbx_utf8_cut(msg, PART_MAX), msg);
		return out;
	}
	if (wait && jstr(wait, "reason")) {
		const char *reason = jstr(wait, "reason"), *msg = or (jstr(wait, "message"), "");
		snprintf(out, n, "container %.*s is waiting: %.*s%s%.*s", sbx_utf8_cut(cname, 63), cname,
			 sbx_utf8_cut(reason, PART_MAX), reason, colon(msg), sbx_utf8_cut(msg, PART_MAX), msg);
		return out;
	}
	const cJSON *sched = pod_condition(st, "PodScheduled");
	const char *ss = jstr(sched, "status");
	if (ss && !strcmp(ss, "False")) {
		const char *msg = jstr(sched, "message");
		const char *w = msg && *msg ? msg : or (jstr(sched, "reason"), "no reason");
		snprintf(out, n, "not scheduled: %.*s", sbx_utf8_cut(w, PART_MAX), w);
		return out;
	}
	const char *reason = jstr(st, "reason"), *msg = or (jstr(st, "message"), "");
	if (reason && *reason)
		snprintf(out, n, "%.*s%s%.*s", sbx_utf8_cut(reason, PART_MAX), reason, colon(msg),
			 sbx_utf8_cut(msg, PART_MAX), msg);
	return out;
}

/* Adds the string member k of from to to, cut to PART_MAX bytes. */
static void keep_str(cJSON *to, const cJSON *from, const char *k)
{
	const char *v = jstr(from, k);
	if (!v)
		return;
	char buf[PART_MAX + 1];
	snprintf(buf, sizeof buf, "%.*s", sbx_utf8_cut(v, PART_MAX), v);
	jb_str(to, k, buf);
}

void sbx_pod_why_keep(cJSON *out, const cJSON *st, const char *container)
{
	const cJSON *cs = container_status(st, container);
	const cJSON *term = jobj(jobj(cs, "state"), "terminated"), *wait = jobj(jobj(cs, "state"), "waiting");
	if (term || wait) {
		cJSON *c = jb_obj();
		jb_push(jb_add_arr(out, "containerStatuses"), c);
		keep_str(c, cs, "name");
		cJSON *state = jb_add_obj(jb_add_obj(c, "state"), term ? "terminated" : "waiting");
		keep_str(state, term ? term : wait, "reason");
		keep_str(state, term ? term : wait, "message");
		const cJSON *code = jobj(term, "exitCode");
		if (cJSON_IsNumber(code))
			jb_num(state, "exitCode", code->valuedouble);
	}
	const cJSON *sched = pod_condition(st, "PodScheduled");
	const char *ss = jstr(sched, "status");
	if (ss && !strcmp(ss, "False")) {
		cJSON *conds = cJSON_GetObjectItemCaseSensitive(out, "conditions");
		if (!cJSON_IsArray(conds))
			conds = jb_add_arr(out, "conditions");
		cJSON *c = jb_obj();
		jb_push(conds, c);
		jb_str(c, "type", "PodScheduled");
		jb_str(c, "status", "False");
		keep_str(c, sched, "reason");
		keep_str(c, sched, "message");
	}
	keep_str(out, st, "reason");
	keep_str(out, st, "message");
}
