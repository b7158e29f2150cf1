package models

import (
	"strconv"
)

// FormatID writes an id the way the API shows it: a digit string.
func FormatID(id int64) string { return strconv.FormatInt(id, 10) }

// ParseID reads an id written by FormatID. Anything else is EINVALID.
func ParseID(field, s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, Invalid(field, "must be a positive integer id")
	}
	return id, nil
}
