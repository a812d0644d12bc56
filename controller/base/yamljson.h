/* YAML documents (libyaml) read into cJSON trees, so kubeconfig files, the
 * controller config and JSON share one in-memory shape. Scalars stay strings
 * unless plain (unquoted) and spelled as a YAML 1.2 core-schema bool, null, or
 * number; anchors/aliases are refused (a kubeconfig needs none, and aliases are
 * the classic way to blow up memory). */
#ifndef SBX_BASE_YAMLJSON_H
#define SBX_BASE_YAMLJSON_H

#include <stddef.h>

#include <cjson/cJSON.h>

/* Parses the first document of text[0..len). Returns a new tree (caller frees
 * with cJSON_Delete), or NULL with a message in err (size errlen). An empty
 * document yields an empty object. */
cJSON *yaml_to_json(const char *text, size_t len, char *err, size_t errlen);

/* o[key] as text: a string, or a plain scalar YAML typed as a number or a
 * bool rendered back (into scratch). Returns a pointer borrowed from o or
 * scratch, or NULL when absent or of another type. */
const char *yaml_str(const cJSON *o, const char *key, char scratch[64]);
/* yaml_str, with "" counted as absent (borrowed alike). */
const char *yaml_str_nonempty(const cJSON *o, const char *key, char scratch[64]);

#endif
