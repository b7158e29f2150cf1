package api

import (
	"encoding/json"
	"net/http"
	"strconv"
	"sync"

	"github.com/gin-gonic/gin"

	"iam/api/jsonout"
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
		writeList(c, viewsOf(users, newUserView), fields, meta)
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
	// With its length said, the page goes out in one piece rather than
	// chunked: a write and the client's chunk parsing fewer.
	c.Header("Content-Length", strconv.Itoa(len(b)))
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
	b = jsonout.AppendTimeUTC(append(b, `},"creationTime":`...), p.CreationTime)
	b = strconv.AppendBool(append(b, `,"isEnabled":`...), p.IsEnabled)
	if u.PrimarySource == nil {
		b = appendJSONID(append(b, `,"id":`...), u.ID)
	} else {
		b = appendJSONString(append(b, `,"id":`...), p.ID)
	}
	b = jsonout.AppendTimeUTC(append(b, `,"modifiedTime":`...), p.ModifiedTime)
	return append(b, '}')
}

// appendJSONID writes an id as models.FormatID does, as a JSON string.
func appendJSONID(b []byte, id int64) []byte {
	b = append(b, '"')
	b = strconv.AppendInt(b, id, 10)
	return append(b, '"')
}

// appendJSONString writes s as a JSON string the way encoding/json does
// (jsonout.AppendString).
func appendJSONString(b []byte, s string) []byte { return jsonout.AppendString(b, s) }
