package api

import (
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"iam/models/listing"
)

// writeUserPage answers a list of users with {data, meta}. Without fields
// the users are written by appendJSON, not encoding/json: a page of users
// is the bulk of the response, and encoding/json's reflection and its
// check of what a MarshalJSON returns cost several times more.
func writeUserPage(c *gin.Context, views []userView, fields []string, meta listing.Meta) {
	if len(fields) > 0 {
		c.JSON(http.StatusOK, gin.H{"data": listing.Project(views, fields), "meta": meta})
		return
	}
	metaJSON, err := json.Marshal(meta)
	if err != nil {
		abortWithError(c, err)
		return
	}
	buf := pageBuffers.Get().(*[]byte)
	defer pageBuffers.Put(buf)
	b := append((*buf)[:0], `{"data":[`...)
	for i := range views {
		if i > 0 {
			b = append(b, ',')
		}
		b = views[i].appendJSON(b)
	}
	b = append(b, `],"meta":`...)
	b = append(b, metaJSON...)
	b = append(b, '}')
	c.Data(http.StatusOK, "application/json; charset=utf-8", b)
	*buf = b
}

// pageBuffers recycles the buffers of list pages (100 users make about
// 90 KB), sparing the allocator and the collector.
var pageBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 128<<10); return &b }}

// appendJSON appends the user as encoding/json writes it.
func (v *userView) appendJSON(b []byte) []byte {
	str := func(key, val string) {
		b = append(b, ',', '"')
		b = append(b, key...)
		b = append(b, '"', ':')
		b = appendJSONString(b, val)
	}
	b = append(b, `{"id":`...)
	b = appendJSONString(b, v.ID)
	str("firstName", v.FirstName)
	str("lastName", v.LastName)
	str("displayName", v.DisplayName)
	str("email", v.Email)
	str("employeeID", v.EmployeeID)
	str("title", v.Title)
	str("department", v.Department)
	str("company", v.Company)
	str("description", v.Description)
	if v.Manager == nil {
		b = append(b, `,"manager":null`...)
	} else {
		str("manager", *v.Manager)
	}
	str("city", v.City)
	str("stateProvince", v.StateProvince)
	str("street", v.Street)
	str("zipPostal", v.ZipPostal)
	str("postOfficeBox", v.PostOfficeBox)
	str("workLocation", v.WorkLocation)
	str("seatingLocation", v.SeatingLocation)
	str("country", v.Country)
	str("mobileNumber", v.MobileNumber)
	str("homePhone", v.HomePhone)
	str("telephoneNumber", v.TelephoneNumber)
	str("fax", v.Fax)
	str("gender", v.Gender)
	str("language", v.Language)
	b = append(b, `,"isDomainVerified":`...)
	b = strconv.AppendBool(b, v.IsDomainVerified)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(v.Status), 10)
	b = append(b, `,"isLicensed":`...)
	b = strconv.AppendBool(b, v.IsLicensed)
	b = append(b, `,"primarySource":`...)
	if p := v.PrimarySource; p == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, `{"applicationName":`...)
		b = appendJSONString(b, p.ApplicationName)
		b = append(b, `,"applicationService":{"id":`...)
		b = appendJSONString(b, p.ApplicationService.ID)
		str("name", p.ApplicationService.Name)
		str("serviceName", p.ApplicationService.ServiceName)
		str("logo", p.ApplicationService.Logo)
		b = append(b, `},"creationTime":`...)
		b = appendJSONTime(b, p.CreationTime)
		b = append(b, `,"isEnabled":`...)
		b = strconv.AppendBool(b, p.IsEnabled)
		str("id", p.ID)
		b = append(b, `,"modifiedTime":`...)
		b = appendJSONTime(b, p.ModifiedTime)
		b = append(b, '}')
	}
	return append(b, '}')
}

// appendJSONTime writes t as encoding/json does (RFC 3339 with nanoseconds).
func appendJSONTime(b []byte, t time.Time) []byte {
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

const hexDigits = "0123456789abcdef"

// appendJSONString writes s as a JSON string the way encoding/json does:
// control characters, quotes, backslashes, <, >, &, U+2028 and U+2029
// escaped, invalid UTF-8 replaced by U+FFFD.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
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
