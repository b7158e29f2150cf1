package api

import (
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"iam/models/identity"
	"iam/models/listing"
)

// writeUserPage answers a page of users with {data, meta}. Without fields
// the users are written by appendUserJSON (generated from models.User's
// tags, users_gen.go), straight from the models, not by
// encoding/json from views: a page of users is the bulk of the response,
// and encoding/json's reflection, its check of what a MarshalJSON returns
// and the views' allocations cost several times more.
func writeUserPage(c *gin.Context, users []identity.User, fields []string, meta listing.Meta) error {
	if len(fields) > 0 {
		writeList(c, userViews(users), fields, meta)
		return nil
	}
	metaJSON, err := json.Marshal(meta)
	if err != nil {
		return err
	}
	buf := pageBuffers.Get().(*[]byte)
	defer pageBuffers.Put(buf)
	b := append((*buf)[:0], `{"data":[`...)
	for i := range users {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendUserJSON(b, &users[i])
	}
	b = append(b, `],"meta":`...)
	b = append(b, metaJSON...)
	b = append(b, '}')
	c.Data(http.StatusOK, "application/json; charset=utf-8", b)
	*buf = b
	return nil
}

// pageBuffers recycles the buffers of list pages (100 users make about
// 90 KB), sparing the allocator and the collector.
var pageBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 128<<10); return &b }}

// appendPrimarySourceJSON appends the user's primary source as
// encoding/json writes newPrimarySourceView's.
func appendPrimarySourceJSON(b []byte, u *identity.User) []byte {
	p := u.PrimarySource
	if p == nil { // this service: see newPrimarySourceView
		p = &identity.PrimarySource{ApplicationName: localSourceName, ApplicationService: localSource,
			IsEnabled: true, CreationTime: u.CreatedAt, ModifiedTime: u.UpdatedAt}
	}
	b = appendJSONString(append(b, `{"applicationName":`...), p.ApplicationName)
	b = appendJSONString(append(b, `,"applicationService":{"id":`...), p.ApplicationService.ID)
	b = appendJSONString(append(b, `,"name":`...), p.ApplicationService.Name)
	b = appendJSONString(append(b, `,"serviceName":`...), p.ApplicationService.ServiceName)
	b = appendJSONString(append(b, `,"logo":`...), p.ApplicationService.Logo)
	b = appendJSONTime(append(b, `},"creationTime":`...), p.CreationTime.UTC())
	b = strconv.AppendBool(append(b, `,"isEnabled":`...), p.IsEnabled)
	if u.PrimarySource == nil {
		b = appendJSONID(append(b, `,"id":`...), u.ID)
	} else {
		b = appendJSONString(append(b, `,"id":`...), p.ID)
	}
	b = appendJSONTime(append(b, `,"modifiedTime":`...), p.ModifiedTime.UTC())
	return append(b, '}')
}

// appendJSONID writes an id as models.FormatID does, as a JSON string.
func appendJSONID(b []byte, id int64) []byte {
	b = append(b, '"')
	b = strconv.AppendInt(b, id, 10)
	return append(b, '"')
}

// appendJSONTime writes t as encoding/json does (RFC 3339 with nanoseconds).
func appendJSONTime(b []byte, t time.Time) []byte {
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

const hexDigits = "0123456789abcdef"

// jsonSafe tells which bytes appendJSONString copies as they are: printable
// ASCII but for the quote, the backslash and the HTML characters.
var jsonSafe = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// appendJSONString writes s as a JSON string the way encoding/json does:
// control characters, quotes, backslashes, <, >, &, U+2028 and U+2029
// escaped, invalid UTF-8 replaced by U+FFFD.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if jsonSafe[c] {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
