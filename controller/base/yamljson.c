#include "base/yamljson.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

/* Nesting deeper than this is refused rather than recursed into. */
#define YAML_MAX_DEPTH 64

struct yparser {
	yaml_parser_t p;
	char *err;
	size_t errlen;
};

static cJSON *parse_node(struct yparser *y, yaml_event_t *ev, int depth);

static void yerr(struct yparser *y, const char *msg, const yaml_event_t *ev)
{
	if (ev)
		snprintf(y->err, y->errlen, "%s at line %zu", msg, (size_t)ev->start_mark.line + 1);
	else
		snprintf(y->err, y->errlen, "%s", msg);
}

static int next_event(struct yparser *y, yaml_event_t *ev)
{
	if (!yaml_parser_parse(&y->p, ev)) {
		snprintf(y->err, y->errlen, "YAML syntax error: %s at line %zu",
			 y->p.problem ? y->p.problem : "unknown", (size_t)y->p.problem_mark.line + 1);
		return -1;
	}
	return 0;
}

static int is_plain_number(const char *s)
{
	const char *p = s;
	if (*p == '-' || *p == '+')
		p++;
	if (!*p)
		return 0;
	int digits = 0, dot = 0, exp = 0;
	for (; *p; p++) {
		if (*p >= '0' && *p <= '9')
			digits++;
		else if (*p == '.' && !dot && !exp)
			dot = 1;
		else if ((*p == 'e' || *p == 'E') && digits && !exp) {
			exp = 1;
			if (p[1] == '-' || p[1] == '+')
				p++;
		} else
			return 0;
	}
	return digits > 0;
}

static cJSON *scalar_to_json(const yaml_event_t *ev)
{
	const char *v = (const char *)ev->data.scalar.value;
	if (ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE) {
		if (!strcmp(v, "true") || !strcmp(v, "True") || !strcmp(v, "TRUE"))
			return cJSON_CreateTrue();
		if (!strcmp(v, "false") || !strcmp(v, "False") || !strcmp(v, "FALSE"))
			return cJSON_CreateFalse();
		if (!strcmp(v, "null") || !strcmp(v, "~") || !strcmp(v, "Null") || !*v)
			return cJSON_CreateNull();
		if (is_plain_number(v))
			return cJSON_CreateNumber(strtod(v, NULL));
	}
	return cJSON_CreateString(v);
}

static cJSON *parse_mapping(struct yparser *y, int depth)
{
	cJSON *obj = cJSON_CreateObject();
	for (;;) {
		yaml_event_t k;
		if (next_event(y, &k) < 0)
			goto fail;
		if (k.type == YAML_MAPPING_END_EVENT) {
			yaml_event_delete(&k);
			return obj;
		}
		if (k.type != YAML_SCALAR_EVENT) {
			yerr(y, "mapping keys must be scalars", &k);
			yaml_event_delete(&k);
			goto fail;
		}
		char *key = strdup((const char *)k.data.scalar.value);
		yaml_event_delete(&k);
		if (!key)
			goto fail;
		yaml_event_t v;
		if (next_event(y, &v) < 0) {
			free(key);
			goto fail;
		}
		cJSON *child = parse_node(y, &v, depth + 1);
		yaml_event_delete(&v);
		if (!child) {
			free(key);
			goto fail;
		}
		/* Later duplicates win, as in most YAML loaders. */
		if (cJSON_GetObjectItemCaseSensitive(obj, key))
			cJSON_ReplaceItemInObjectCaseSensitive(obj, key, child);
		else
			cJSON_AddItemToObject(obj, key, child);
		free(key);
	}
fail:
	cJSON_Delete(obj);
	return NULL;
}

static cJSON *parse_sequence(struct yparser *y, int depth)
{
	cJSON *arr = cJSON_CreateArray();
	for (;;) {
		yaml_event_t v;
		if (next_event(y, &v) < 0)
			goto fail;
		if (v.type == YAML_SEQUENCE_END_EVENT) {
			yaml_event_delete(&v);
			return arr;
		}
		cJSON *child = parse_node(y, &v, depth + 1);
		yaml_event_delete(&v);
		if (!child)
			goto fail;
		cJSON_AddItemToArray(arr, child);
	}
fail:
	cJSON_Delete(arr);
	return NULL;
}

static cJSON *parse_node(struct yparser *y, yaml_event_t *ev, int depth)
{
	if (depth > YAML_MAX_DEPTH) {
		yerr(y, "YAML nested too deeply", ev);
		return NULL;
	}
	switch (ev->type) {
	case YAML_SCALAR_EVENT:
		return scalar_to_json(ev);
	case YAML_MAPPING_START_EVENT:
		return parse_mapping(y, depth);
	case YAML_SEQUENCE_START_EVENT:
		return parse_sequence(y, depth);
	case YAML_ALIAS_EVENT:
		yerr(y, "YAML aliases are not supported", ev);
		return NULL;
	default:
		yerr(y, "unexpected YAML event", ev);
		return NULL;
	}
}

cJSON *yaml_to_json(const char *text, size_t len, char *err, size_t errlen)
{
	struct yparser y = { .err = err, .errlen = errlen };
	cJSON *root = NULL;
	if (errlen)
		err[0] = '\0';
	if (!yaml_parser_initialize(&y.p)) {
		snprintf(err, errlen, "cannot initialise the YAML parser");
		return NULL;
	}
	yaml_parser_set_input_string(&y.p, (const unsigned char *)text, len);
	yaml_event_t ev;
	int done = 0;
	while (!done) {
		if (next_event(&y, &ev) < 0)
			break;
		switch (ev.type) {
		case YAML_STREAM_START_EVENT:
		case YAML_DOCUMENT_START_EVENT:
			break;
		case YAML_STREAM_END_EVENT:
		case YAML_DOCUMENT_END_EVENT:
			if (!root)
				root = cJSON_CreateObject();
			done = 1;
			break;
		default:
			root = parse_node(&y, &ev, 0);
			done = 1;
			break;
		}
		yaml_event_delete(&ev);
	}
	yaml_parser_delete(&y.p);
	return root;
}

const char *yaml_str(const cJSON *o, const char *key, char scratch[64])
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	if (cJSON_IsString(v))
		return v->valuestring;
	if (cJSON_IsNumber(v)) {
		snprintf(scratch, 64, "%.17g", v->valuedouble);
		return scratch;
	}
	if (cJSON_IsBool(v))
		return cJSON_IsTrue(v) ? "true" : "false";
	return NULL;
}

const char *yaml_str_nonempty(const cJSON *o, const char *key, char scratch[64])
{
	const char *s = yaml_str(o, key, scratch);
	return s && s[0] ? s : NULL;
}
