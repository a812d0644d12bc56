#include "base/jsoncount.h"

size_t json_count_values(const char *text, size_t len)
{
	size_t n = 0;
	int in_string = 0, value = 0;
	for (size_t i = 0; i < len; i++) {
		char ch = text[i];
		if (in_string) {
			if (ch == '\\')
				i++;
			else if (ch == '"')
				in_string = 0;
			continue;
		}
		switch (ch) {
		case '"':
			in_string = 1;
			/* fall through */
		case '{':
		case '[':
			n++;
			value = 0;
			break;
		case ',':
		case ':':
		case ']':
		case '}':
			value = 0;
			break;
		case ' ':
		case '\t':
		case '\n':
		case '\r':
			break;
		default: /* a number or literal: one value per run */
			if (!value)
				n++;
			value = 1;
		}
	}
	return n;
}
