package notify

import (
	"encoding/base64"
	"errors"
	"fmt"
	"mime"
	"net/url"
	"regexp"
	"strings"
)

// ParseDataURI reads an RFC 2397 data: URI
// (data:[<media type>][;base64],<data>). The content type defaults to
// text/plain; charset=US-ASCII as the RFC says.
func ParseDataURI(uri string) (contentType string, data []byte, err error) {
	rest, ok := cutPrefixFold(strings.TrimSpace(uri), "data:")
	if !ok {
		return "", nil, errors.New("is not a data: URI")
	}
	meta, payload, ok := strings.Cut(rest, ",")
	if !ok {
		return "", nil, errors.New("data: URI has no comma before its data")
	}
	isBase64 := false
	if m, found := cutSuffixFold(meta, ";base64"); found {
		meta, isBase64 = m, true
	}
	contentType = "text/plain; charset=US-ASCII"
	if meta != "" {
		var mt string
		var params map[string]string
		if mt, params, err = mime.ParseMediaType(meta); err != nil {
			return "", nil, fmt.Errorf("data: URI media type: %w", err)
		}
		contentType = mime.FormatMediaType(mt, params)
	}
	if isBase64 {
		payload = strings.Map(func(r rune) rune { // tolerate folded base64
			if r == ' ' || r == '\n' || r == '\r' || r == '\t' {
				return -1
			}
			return r
		}, payload)
		data, err = base64.StdEncoding.DecodeString(payload)
		if err != nil {
			if data, err = base64.RawStdEncoding.DecodeString(payload); err != nil {
				return "", nil, errors.New("data: URI holds invalid base64")
			}
		}
		return contentType, data, nil
	}
	s, err := url.PathUnescape(payload)
	if err != nil {
		return "", nil, errors.New("data: URI holds invalid percent-encoding")
	}
	return contentType, []byte(s), nil
}

// DataURI writes data as a base64 data: URI.
func DataURI(contentType string, data []byte) string {
	return "data:" + contentType + ";base64," + base64.StdEncoding.EncodeToString(data)
}

// imgDataSrc finds src attributes whose value is a data: URI.
var imgDataSrc = regexp.MustCompile(`(?i)(\ssrc\s*=\s*)(?:"(data:[^"]*)"|'(data:[^']*)')`)

// InlineDataImages replaces every src="data:…" of html with src="cid:…" and
// returns the images as inline files, so that clients which block data:
// URIs still show them. Identical images become one part. A data: URI that
// cannot be read is left as it is.
func InlineDataImages(html string) (string, []File) {
	if !strings.Contains(html, "ata:") && !strings.Contains(html, "ATA:") { // no data: URI: skip the regexp
		return html, nil
	}
	var files []File
	seen := map[string]string{}
	out := imgDataSrc.ReplaceAllStringFunc(html, func(m string) string {
		sub := imgDataSrc.FindStringSubmatch(m)
		uri := sub[2] + sub[3]
		cid, ok := seen[uri]
		if !ok {
			ct, data, err := ParseDataURI(uri)
			if err != nil {
				return m
			}
			cid = fmt.Sprintf("inline-%d@iam", len(files)+1)
			seen[uri] = cid
			files = append(files, File{Name: fmt.Sprintf("image-%d%s", len(files)+1, extensionFor(ct)), ContentType: ct, ContentID: cid, Data: data})
		}
		return sub[1] + `"cid:` + cid + `"`
	})
	return out, files
}

func extensionFor(contentType string) string {
	mt, _, _ := mime.ParseMediaType(contentType)
	switch mt {
	case "image/png":
		return ".png"
	case "image/jpeg":
		return ".jpg"
	case "image/gif":
		return ".gif"
	case "image/svg+xml":
		return ".svg"
	case "image/webp":
		return ".webp"
	}
	return ""
}

func cutPrefixFold(s, prefix string) (string, bool) {
	if len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix) {
		return s[len(prefix):], true
	}
	return s, false
}

func cutSuffixFold(s, suffix string) (string, bool) {
	if len(s) >= len(suffix) && strings.EqualFold(s[len(s)-len(suffix):], suffix) {
		return s[:len(s)-len(suffix)], true
	}
	return s, false
}
