/* Small borrowed-pointer accessors for cJSON objects as the Kubernetes API
 * shapes them. Each returns NULL when a member is absent or of another type;
 * nothing is copied. */
#ifndef SBX_BASE_JSONGET_H
#define SBX_BASE_JSONGET_H

#include <cjson/cJSON.h>

/* o[k] when it is a string, else NULL. */
static inline const char *jstr(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* o[k] of any type, or NULL. */
static inline const cJSON *jobj(const cJSON *o, const char *k)
{
	return cJSON_GetObjectItemCaseSensitive(o, k);
}

/* obj.metadata[k] when it is a string. */
static inline const char *meta_str(const cJSON *obj, const char *k)
{
	return jstr(jobj(obj, "metadata"), k);
}

/* obj.metadata.annotations[k] when it is a string. */
static inline const char *annotation(const cJSON *obj, const char *k)
{
	return jstr(jobj(jobj(obj, "metadata"), "annotations"), k);
}

/* obj.metadata.labels[k] when it is a string. */
static inline const char *label(const cJSON *obj, const char *k)
{
	return jstr(jobj(jobj(obj, "metadata"), "labels"), k);
}

#endif
