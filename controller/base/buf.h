/* A growable byte buffer with a hard cap (curl's dynbuf): every buffer fed from
 * the network or a file is a struct buf, and growing past its cap is an error
 * the caller sees, never a crash or unbounded memory. The contents are always
 * NUL-terminated so text can be read in place. */
#ifndef SBX_BASE_BUF_H
#define SBX_BASE_BUF_H

#include <stddef.h>

struct buf {
	char *data;   /* owned; NULL until the first append */
	size_t len;   /* bytes in use, not counting the terminating NUL */
	size_t alloc; /* bytes allocated */
	size_t cap;   /* hard limit on len */
};

/* Fills a caller-owned buf that may hold at most cap bytes. */
void buf_init(struct buf *b, size_t cap);
/* Frees the contents; the buf may be reused after buf_init. */
void buf_release(struct buf *b);
/* Empties the buffer, keeping its memory. */
void buf_reset(struct buf *b);
/* Appends n bytes. Returns 0, or -1 when the cap would be exceeded (then
 * nothing is changed). */
int buf_append(struct buf *b, const void *p, size_t n);
int buf_appends(struct buf *b, const char *s);
int buf_appendf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Removes the first n bytes (n <= len). */
void buf_consume(struct buf *b, size_t n);
/* Hands the contents to the caller (caller frees; "" when empty) and empties b. */
char *buf_detach(struct buf *b);
/* Reads a whole file into b. Returns 0, or -1 with errno set (EFBIG past the
 * cap); on error b is left empty. */
int buf_read_file(struct buf *b, const char *path);
/* Reads a whole file (at most cap bytes) into a new NUL-terminated heap
 * string (caller frees; *len, NULL ok, gets its length). Returns NULL with
 * "<path>: <reason>" in err (NULL ok) when it cannot be read or is larger. */
char *buf_load(const char *path, size_t cap, size_t *len, char *err, size_t errlen);

/* Strips trailing spaces, tabs, CRs and newlines from s in place (a token
 * file usually ends in a newline). */
void str_rstrip(char *s);

#endif
