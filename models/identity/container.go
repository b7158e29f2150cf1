package identity

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxUserContainerLen is the most characters a user's container may hold.
const MaxUserContainerLen = 1024

// CheckContainer reports whether s is a distinguished name in the string
// syntax of RFC 4514 (the user's place in the directory, such as
// OU=Sales,DC=example,DC=com): one or more relative distinguished names
// separated by commas, each one or more type=value pairs joined by plus
// signs. A type is a keyword (a letter, then letters, digits and hyphens) or
// a dotted numeric object identifier; a value is either # and an even number
// of hex digits (a BER encoding) or a string in which the characters
// " + , ; < > \ and NUL, a leading space or #, and a trailing space are
// escaped with a backslash (\, or \2C). No spaces around the separators.
// The empty string is not a name (an empty container means "none" and is
// checked by the caller). On failure it returns the reason.
func CheckContainer(s string) (reason string, ok bool) {
	if s == "" {
		return "must not be empty", false
	}
	if !utf8.ValidString(s) {
		return "must be valid UTF-8 text", false
	}
	i := 0
	for {
		// attributeType
		start := i
		if i < len(s) && isAlpha(s[i]) {
			for i < len(s) && (isAlpha(s[i]) || isDigit(s[i]) || s[i] == '-') {
				i++
			}
		} else if i < len(s) && isDigit(s[i]) {
			if !scanOID(s, &i) {
				return "has a malformed numeric attribute type at position " + strconv.Itoa(start+1), false
			}
		} else {
			return "needs an attribute type (such as OU) at position " + strconv.Itoa(start+1), false
		}
		if i >= len(s) || s[i] != '=' {
			return "needs = after the attribute type " + s[start:i], false
		}
		i++
		// attributeValue
		if i < len(s) && s[i] == '#' {
			i++
			n := 0
			for i < len(s) && isHex(s[i]) {
				i++
				n++
			}
			if n == 0 || n%2 != 0 {
				return "has a # value that is not an even number of hex digits", false
			}
		} else {
			valStart := i
			lastEscaped := false
			for i < len(s) && s[i] != ',' && s[i] != '+' {
				c := s[i]
				lastEscaped = false
				switch {
				case c == '\\':
					if i+1 >= len(s) {
						return "ends in a lone backslash", false
					}
					n := s[i+1]
					if isHex(n) && i+2 < len(s) && isHex(s[i+2]) {
						i += 3
					} else if strings.IndexByte(` "#+,;<=>\`, n) >= 0 {
						i += 2
					} else {
						return "has a backslash escaping neither a special character nor two hex digits", false
					}
					lastEscaped = true
					continue
				case c == '"' || c == ';' || c == '<' || c == '>' || c == 0:
					return "has an unescaped " + quoteByte(c) + " in a value (escape it with a backslash)", false
				case i == valStart && (c == ' ' || c == '#'):
					return "has a value starting with an unescaped " + quoteByte(c), false
				}
				i++
			}
			if i > valStart && s[i-1] == ' ' && !lastEscaped {
				return "has a value ending with an unescaped space", false
			}
		}
		if i == len(s) {
			return "", true
		}
		// s[i] is ',' or '+'
		i++
		if i == len(s) {
			return "ends with a separator", false
		}
	}
}

func scanOID(s string, i *int) bool {
	for {
		if *i >= len(s) || !isDigit(s[*i]) {
			return false
		}
		if s[*i] == '0' && *i+1 < len(s) && isDigit(s[*i+1]) {
			return false // no leading zeros
		}
		for *i < len(s) && isDigit(s[*i]) {
			*i++
		}
		if *i < len(s) && s[*i] == '.' {
			*i++
			continue
		}
		return true
	}
}

func isAlpha(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isDigit(c byte) bool { return c >= '0' && c <= '9' }
func isHex(c byte) bool   { return isDigit(c) || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

func quoteByte(c byte) string {
	if c == 0 {
		return "NUL"
	}
	if c == ' ' {
		return "space"
	}
	return string(rune(c))
}
