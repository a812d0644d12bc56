/* The program's single out-of-memory policy: allocation failure aborts with a
 * message (as Redis's zmalloc does), so no caller half-handles it. Every
 * function here either returns valid memory or does not return. */
#ifndef SBX_BASE_XMALLOC_H
#define SBX_BASE_XMALLOC_H

#include <stddef.h>

/* malloc, calloc and realloc that never return NULL (caller frees). */
void *xmalloc(size_t n);
void *xcalloc(size_t count, size_t size);
void *xrealloc(void *p, size_t n);
/* Returns a heap copy of s (caller frees); NULL in, NULL out. */
char *xstrdup(const char *s);
/* Returns a heap copy of the first n bytes of s, NUL-terminated (caller frees). */
char *xstrndup(const char *s, size_t n);
/* printf into a freshly allocated string (caller frees). */
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
