package scim

import (
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	mscim "iam/models/scim"
)

// ListSchema and SearchSchema are the URNs of list responses and search
// requests.
const (
	ListSchema   = "urn:ietf:params:scim:api:messages:2.0:ListResponse"
	SearchSchema = "urn:ietf:params:scim:api:messages:2.0:SearchRequest"
)

// search is a parsed list request: the store's query and the projection.
type search struct {
	query mscim.Query
	proj  projection
}

// newSearch checks the parameters of a list request, whether they came in
// the query string or a search body.
func newSearch(filter, sortBy, sortOrder string, startIndex, count *int, attrs, excluded string) (search, error) {
	var s search
	if strings.TrimSpace(filter) != "" {
		e, err := mscim.ParseFilter(filter)
		if err != nil {
			return s, err
		}
		s.query.Filter, s.query.FilterText = e, filter
	}
	s.query.SortBy = strings.TrimSpace(sortBy)
	switch strings.ToLower(strings.TrimSpace(sortOrder)) {
	case "", "ascending":
	case "descending":
		s.query.Descending = true
	default:
		return s, invalidValue("sortOrder must be ascending or descending")
	}
	s.query.StartIndex = 1
	if startIndex != nil && *startIndex > 1 {
		s.query.StartIndex = *startIndex
	}
	s.query.Count = DefaultCount
	if count != nil {
		s.query.Count = max(*count, 0)
	}
	s.query.Count = min(s.query.Count, mscim.MaxCount)
	var err error
	s.proj, err = projectionOf(attrs, excluded)
	return s, err
}

// intParam reads an integer query parameter (nil when absent).
func intParam(c *gin.Context, name string) (*int, error) {
	v, ok := c.GetQuery(name)
	if !ok || v == "" {
		return nil, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return nil, invalidValue(name + " must be an integer")
	}
	return &n, nil
}

// searchOfQuery reads a GET list's parameters.
func searchOfQuery(c *gin.Context) (search, error) {
	start, err := intParam(c, "startIndex")
	if err != nil {
		return search{}, err
	}
	count, err := intParam(c, "count")
	if err != nil {
		return search{}, err
	}
	return newSearch(c.Query("filter"), c.Query("sortBy"), c.Query("sortOrder"), start, count, c.Query("attributes"), c.Query("excludedAttributes"))
}

// searchOfBody reads a POST .search request.
func searchOfBody(c *gin.Context) (search, error) {
	var req struct {
		Schemas            []string `json:"schemas"`
		Attributes         []string `json:"attributes"`
		ExcludedAttributes []string `json:"excludedAttributes"`
		Filter             string   `json:"filter"`
		SortBy             string   `json:"sortBy"`
		SortOrder          string   `json:"sortOrder"`
		StartIndex         *int     `json:"startIndex"`
		Count              *int     `json:"count"`
	}
	if err := decode(c, &req); err != nil {
		return search{}, err
	}
	return newSearch(req.Filter, req.SortBy, req.SortOrder, req.StartIndex, req.Count,
		strings.Join(req.Attributes, ","), strings.Join(req.ExcludedAttributes, ","))
}

// listResponse is a ListResponse of resources.
func listResponse(total, startIndex int, resources []any) doc {
	return doc{"schemas": []any{ListSchema}, "totalResults": total, "startIndex": max(startIndex, 1),
		"itemsPerPage": len(resources), "Resources": resources}
}

// projection is attributes / excludedAttributes (RFC 7644 §3.4.2.5): the
// attributes to return, or those to leave out. id and schemas always stay.
type projection struct {
	include, exclude []mscim.Path
}

func parsePaths(list string) ([]mscim.Path, error) {
	var out []mscim.Path
	for _, a := range strings.Split(list, ",") {
		if a = strings.TrimSpace(a); a == "" {
			continue
		}
		p, err := mscim.ParsePathName(a)
		if err != nil {
			return nil, invalidValue("attributes: " + err.Error())
		}
		if strings.EqualFold(p.URN, mscim.UserSchema) || strings.EqualFold(p.URN, mscim.GroupSchema) {
			p.URN = ""
		}
		out = append(out, p)
	}
	return out, nil
}

// projectionOf parses the attributes and excludedAttributes parameters.
func projectionOf(attrs, excluded string) (projection, error) {
	var p projection
	var err error
	if p.include, err = parsePaths(attrs); err != nil {
		return p, err
	}
	p.exclude, err = parsePaths(excluded)
	return p, err
}

// empty reports whether the projection returns every attribute.
func (p projection) empty() bool { return len(p.include) == 0 && len(p.exclude) == 0 }

// wants reports whether the projection returns the top-level attribute
// name: the caller need not load it otherwise (excludedAttributes=members).
func (p projection) wants(name string) bool {
	for _, e := range p.exclude {
		if e.URN == "" && e.Sub == "" && strings.EqualFold(e.Attr, name) {
			return false
		}
	}
	if len(p.include) == 0 {
		return true
	}
	for _, i := range p.include {
		if i.URN == "" && strings.EqualFold(i.Attr, name) {
			return true
		}
	}
	return false
}

// apply projects d.
func (p projection) apply(d doc) doc {
	if len(p.include) > 0 {
		out := doc{"schemas": d["schemas"], "id": d["id"]}
		for _, i := range p.include {
			src, dst := d, out
			if i.URN != "" {
				ext, _ := get(d, i.URN)
				m, ok := ext.(doc)
				if !ok {
					continue
				}
				src = m
				o, _ := out[i.URN].(doc)
				if o == nil {
					o = doc{}
					out[i.URN] = o
				}
				dst = o
			}
			k := key(src, i.Attr)
			v, ok := src[k]
			if !ok {
				continue
			}
			if i.Sub == "" {
				dst[k] = v
				continue
			}
			if m, ok := v.(doc); ok {
				sk := key(m, i.Sub)
				if sv, ok := m[sk]; ok {
					o, _ := dst[k].(doc)
					if o == nil {
						o = doc{}
						dst[k] = o
					}
					o[sk] = sv
				}
			}
		}
		d = out
	}
	for _, e := range p.exclude {
		if e.URN == "" && e.Sub == "" && (strings.EqualFold(e.Attr, "id") || strings.EqualFold(e.Attr, "schemas")) {
			continue
		}
		src := d
		if e.URN != "" {
			m, _ := get(d, e.URN)
			if src, _ = m.(doc); src == nil {
				continue
			}
		}
		k := key(src, e.Attr)
		if e.Sub == "" {
			delete(src, k)
		} else if m, ok := src[k].(doc); ok {
			delete(m, key(m, e.Sub))
		}
	}
	return d
}
