#include "obs/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

static enum log_level min_level = LOG_INFO;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static const char *const names[] = { "debug", "info", "warn", "error" };

void log_set_level(enum log_level lvl)
{
	min_level = lvl;
}

int log_parse_level(const char *s)
{
	for (int i = 0; i < 4; i++)
		if (s && !strcmp(s, names[i]))
			return i;
	return -1;
}

static void emit(enum log_level lvl, const char *msg, va_list kv)
{
	char ts[96];
	struct timespec now;
	struct tm tm;
	clock_gettime(CLOCK_REALTIME, &now);
	gmtime_r(&now.tv_sec, &tm);
	snprintf(ts, sizeof ts, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900,
		 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, now.tv_nsec / 1000000);
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "ts", ts);
	cJSON_AddStringToObject(o, "level", names[lvl]);
	cJSON_AddStringToObject(o, "msg", msg);
	for (;;) {
		const char *k = va_arg(kv, const char *);
		if (!k)
			break;
		const char *v = va_arg(kv, const char *);
		if (v)
			cJSON_AddStringToObject(o, k, v);
	}
	char *line = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	if (!line)
		return;
	pthread_mutex_lock(&log_lock);
	fputs(line, stderr);
	fputc('\n', stderr);
	fflush(stderr);
	pthread_mutex_unlock(&log_lock);
	cJSON_free(line);
}

void log_kv_(enum log_level lvl, const char *msg, ...)
{
	if (lvl < min_level)
		return;
	va_list ap;
	va_start(ap, msg);
	emit(lvl, msg, ap);
	va_end(ap);
}

static void emit_plain(enum log_level lvl, const char *msg, ...)
{
	va_list ap;
	va_start(ap, msg);
	emit(lvl, msg, ap);
	va_end(ap);
}

void log_msg(enum log_level lvl, const char *fmt, ...)
{
	if (lvl < min_level)
		return;
	char msg[2048];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	emit_plain(lvl, msg, (const char *)NULL);
}
