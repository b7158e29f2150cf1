package notify

import (
	"strings"

	"golang.org/x/net/html"
)

// HTMLToText makes the plain-text alternative of an HTML body: the text of
// the document, with line breaks where blocks end, links followed by their
// address, and no scripts, styles or head.
func HTMLToText(s string) string {
	z := html.NewTokenizer(strings.NewReader(s))
	var b strings.Builder
	skip := 0 // depth inside script, style, head or title
	var href string
	for {
		switch z.Next() {
		case html.ErrorToken:
			return tidyText(b.String())
		case html.TextToken:
			if skip == 0 {
				b.WriteString(string(z.Text()))
			}
		case html.StartTagToken, html.SelfClosingTagToken:
			name, hasAttr := z.TagName()
			tag := string(name)
			switch tag {
			case "script", "style", "head", "title":
				skip++
			case "br":
				b.WriteString("\n")
			case "a":
				href = ""
				for hasAttr {
					var k, v []byte
					k, v, hasAttr = z.TagAttr()
					if string(k) == "href" {
						href = string(v)
					}
				}
			case "li":
				b.WriteString("\n- ")
			default:
				if blockTags[tag] {
					b.WriteString("\n")
				}
			}
		case html.EndTagToken:
			name, _ := z.TagName()
			tag := string(name)
			switch tag {
			case "script", "style", "head", "title":
				if skip > 0 {
					skip--
				}
			case "a":
				if href != "" && !strings.HasPrefix(href, "#") && !strings.HasPrefix(strings.ToLower(href), "mailto:") {
					b.WriteString(" (" + href + ")")
				}
				href = ""
			default:
				if blockTags[tag] {
					b.WriteString("\n")
				}
			}
		}
	}
}

var blockTags = map[string]bool{
	"p": true, "div": true, "tr": true, "table": true, "ul": true, "ol": true,
	"h1": true, "h2": true, "h3": true, "h4": true, "h5": true, "h6": true,
	"blockquote": true, "pre": true, "hr": true, "section": true, "article": true,
	"header": true, "footer": true, "body": true,
}

// tidyText collapses runs of spaces within lines and of blank lines.
func tidyText(s string) string {
	lines := strings.Split(s, "\n")
	out := make([]string, 0, len(lines))
	blank := true
	for _, l := range lines {
		l = strings.Join(strings.Fields(l), " ")
		if l == "" {
			if !blank {
				out = append(out, "")
			}
			blank = true
			continue
		}
		out = append(out, l)
		blank = false
	}
	return strings.TrimSpace(strings.Join(out, "\n"))
}
