#include "base/buf.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/xmalloc.h"

void buf_init(struct buf *b, size_t cap)
{
	b->data = NULL;
	b->len = 0;
	b->alloc = 0;
	b->cap = cap;
}

void buf_release(struct buf *b)
{
	free(b->data);
	buf_init(b, b->cap);
}

void buf_reset(struct buf *b)
{
	b->len = 0;
	if (b->data)
		b->data[0] = '\0';
}

static int buf_reserve(struct buf *b, size_t n)
{
	if (n > b->cap || b->len > b->cap - n)
		return -1;
	size_t need = b->len + n + 1;
	if (need <= b->alloc)
		return 0;
	size_t a = b->alloc ? b->alloc : 256;
	while (a < need)
		a *= 2;
	b->data = xrealloc(b->data, a);
	b->alloc = a;
	return 0;
}

int buf_append(struct buf *b, const void *p, size_t n)
{
	if (buf_reserve(b, n) < 0)
		return -1;
	if (n)
		memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = '\0';
	return 0;
}

int buf_appends(struct buf *b, const char *s)
{
	return buf_append(b, s, strlen(s));
}

int buf_appendf(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || buf_reserve(b, (size_t)n) < 0)
		return -1;
	va_start(ap, fmt);
	vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
	return 0;
}

void buf_consume(struct buf *b, size_t n)
{
	if (n >= b->len) {
		buf_reset(b);
		return;
	}
	memmove(b->data, b->data + n, b->len - n);
	b->len -= n;
	b->data[b->len] = '\0';
}

char *buf_detach(struct buf *b)
{
	char *p = b->data ? b->data : xstrdup("");
	buf_init(b, b->cap);
	return p;
}

int buf_read_file(struct buf *b, const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return -1;
	buf_reset(b);
	char chunk[8192];
	size_t n;
	while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
		if (buf_append(b, chunk, n) < 0) {
			fclose(f);
			buf_reset(b);
			errno = EFBIG;
			return -1;
		}
	}
	int err = ferror(f);
	fclose(f);
	if (err) {
		buf_reset(b);
		errno = EIO;
		return -1;
	}
	if (!b->data)
		buf_append(b, "", 0);
	return 0;
}

char *buf_load(const char *path, size_t cap, size_t *len, char *err, size_t errlen)
{
	struct buf b;
	buf_init(&b, cap);
	if (buf_read_file(&b, path) < 0) {
		int e = errno;
		buf_release(&b);
		if (err && errlen)
			snprintf(err, errlen, "%s: %s", path, e == EFBIG ? "file too large" : strerror(e));
		return NULL;
	}
	if (len)
		*len = b.len;
	return buf_detach(&b);
}

void str_rstrip(char *s)
{
	size_t n = strlen(s);
	while (n && (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' ' || s[n - 1] == '\t'))
		s[--n] = '\0';
}
