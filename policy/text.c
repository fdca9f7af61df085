/*
 * text.c - UTF-8 validation and message quoting (see text.h).
 *
 * Owns: the one definition of well-formed UTF-8 (RFC 3629: no overlongs, no
 * surrogates, nothing above U+10FFFF) used by the configuration parser, the
 * environment checks and the JSON writer. Must never: allocate or write
 * past the buffer it is given.
 */
#include "policy/text.h"

size_t text_utf8_seq_len(const unsigned char *s, size_t n)
{
    if (n == 0)
        return 0;
    unsigned char c = s[0];
    if (c < 0x80)
        return 1;
    size_t len;
    unsigned char lo = 0x80, hi = 0xbf;   /* allowed range of the 2nd byte */
    if (c >= 0xc2 && c <= 0xdf) {
        len = 2;
    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        if (c == 0xe0)
            lo = 0xa0;                    /* overlong */
        else if (c == 0xed)
            hi = 0x9f;                    /* surrogates */
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        if (c == 0xf0)
            lo = 0x90;                    /* overlong */
        else if (c == 0xf4)
            hi = 0x8f;                    /* above U+10FFFF */
    } else {
        return 0;                         /* continuation, 0xc0/0xc1, 0xf5.. */
    }
    if (n < len)
        return 0;
    if (s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++)
        if (s[i] < 0x80 || s[i] > 0xbf)
            return 0;
    return len;
}

size_t text_first_bad_byte(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        if (u[i] == 0)
            return i;
        size_t len = text_utf8_seq_len(u + i, n - i);
        if (len == 0)
            return i;
        i += len;
    }
    return n;
}

/* Appends one byte when room remains (one byte kept for the NUL). */
static void text_put(char *out, size_t outlen, size_t *at, char c)
{
    if (*at + 1 < outlen)
        out[*at] = c;
    (*at)++;
}

size_t text_quote(const char *s, size_t n, size_t max_shown, char *out, size_t outlen)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *u = (const unsigned char *)s;
    size_t at = 0, i = 0;
    text_put(out, outlen, &at, '"');
    while (i < n && i < max_shown) {
        unsigned char c = u[i];
        size_t len = text_utf8_seq_len(u + i, n - i);
        if (len > 1) {
            if (i + len > max_shown)
                break;                    /* never show half a character */
            for (size_t k = 0; k < len; k++)
                text_put(out, outlen, &at, (char)u[i + k]);
            i += len;
            continue;
        }
        if (len == 1 && c >= 0x20 && c != 0x7f) {
            if (c == '"' || c == '\\')
                text_put(out, outlen, &at, '\\');
            text_put(out, outlen, &at, (char)c);
        } else {
            text_put(out, outlen, &at, '\\');
            text_put(out, outlen, &at, 'x');
            text_put(out, outlen, &at, hex[c >> 4]);
            text_put(out, outlen, &at, hex[c & 0xf]);
        }
        i++;
    }
    text_put(out, outlen, &at, '"');
    if (i < n) {
        text_put(out, outlen, &at, '.');
        text_put(out, outlen, &at, '.');
        text_put(out, outlen, &at, '.');
    }
    if (outlen == 0)
        return 0;
    size_t end = at < outlen ? at : outlen - 1;
    out[end] = '\0';
    return end;
}

size_t text_trim_partial(const char *s, size_t len)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = len;
    /* Step back over at most 3 continuation bytes to the lead byte. */
    while (i > 0 && len - i < 3 && (u[i - 1] & 0xc0) == 0x80)
        i--;
    if (i == 0)
        return len;
    unsigned char lead = u[i - 1];
    size_t need = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 1;
    size_t have = len - (i - 1);
    return have < need ? i - 1 : len;
}
