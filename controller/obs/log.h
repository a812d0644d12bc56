/* Structured logging: one JSON object per line on stderr (the format log
 * collectors parse without configuration), with a level filter. Thread-safe. */
#ifndef SBX_OBS_LOG_H
#define SBX_OBS_LOG_H

enum log_level { LOG_DEBUG = 0,
		 LOG_INFO = 1,
		 LOG_WARN = 2,
		 LOG_ERROR = 3 };

/* Sets the lowest level written (default LOG_INFO). */
void log_set_level(enum log_level lvl);
/* Parses "debug", "info", "warn", "error"; returns -1 for anything else. */
int log_parse_level(const char *s);
/* Writes {"ts":...,"level":...,"msg":...,<kv pairs>}: the arguments after msg
 * are key, value string pairs (NULL values are skipped). The macro appends the
 * typed terminator, so callers never pass a bare NULL to a variadic. */
void log_kv_(enum log_level lvl, const char *msg, ...);
#define log_kv(lvl, ...) log_kv_(lvl, __VA_ARGS__, (const char *)NULL)
/* printf-style message with no extra fields. */
void log_msg(enum log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)

#endif
