/* Building cJSON trees under the program's out-of-memory policy. cJSON
 * reports allocation failure by returning NULL/false; a silently missing
 * member could drop a subPath and mount a whole shared volume, so every
 * constructor here aborts instead (as xmalloc does). Each returns or attaches
 * a new node owned by the tree it was added to. */
#ifndef SBX_BASE_JBUILD_H
#define SBX_BASE_JBUILD_H

#include <stdio.h>
#include <stdlib.h>

#include <cjson/cJSON.h>

/* x, or abort when it is NULL. */
static inline void *jb_must(void *x)
{
	if (!x) {
		fprintf(stderr, "sandbox-controller: out of memory building JSON\n");
		abort();
	}
	return x;
}

/* A new empty object (the caller owns it until it is added somewhere). */
static inline cJSON *jb_obj(void)
{
	return jb_must(cJSON_CreateObject());
}

/* Adds item to object o under k. */
static inline void jb_add(cJSON *o, const char *k, cJSON *item)
{
	if (!cJSON_AddItemToObject(o, k, item))
		jb_must(NULL);
}

/* Appends item to array a. */
static inline void jb_push(cJSON *a, cJSON *item)
{
	if (!cJSON_AddItemToArray(a, item))
		jb_must(NULL);
}

static inline void jb_str(cJSON *o, const char *k, const char *v)
{
	jb_add(o, k, jb_must(cJSON_CreateString(v)));
}

static inline void jb_bool(cJSON *o, const char *k, int v)
{
	jb_add(o, k, jb_must(cJSON_CreateBool(v)));
}

static inline void jb_num(cJSON *o, const char *k, double v)
{
	jb_add(o, k, jb_must(cJSON_CreateNumber(v)));
}

/* Adds a new empty object under k and returns it. */
static inline cJSON *jb_add_obj(cJSON *o, const char *k)
{
	cJSON *c = jb_obj();
	jb_add(o, k, c);
	return c;
}

/* Adds a new empty array under k and returns it. */
static inline cJSON *jb_add_arr(cJSON *o, const char *k)
{
	cJSON *a = jb_must(cJSON_CreateArray());
	jb_add(o, k, a);
	return a;
}

/* Appends a new string to array a. */
static inline void jb_push_str(cJSON *a, const char *v)
{
	jb_push(a, jb_must(cJSON_CreateString(v)));
}

#endif
