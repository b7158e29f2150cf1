package api

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"iam/models"
	"iam/models/listing"
	"iam/models/protection"
)

// configsPath is where the condition configs live, one family per segment
// (spec 4.3).
const configsPath = "/protection/conditionalfactor-configs"

// Condition config views (spec 2.7–2.9): the fields every family has, then
// the family's own.
type configCommon struct {
	ID                   string    `json:"id"`
	DisplayName          string    `json:"display_name"`
	CAPoliciesUsageCount int64     `json:"ca_policies_usage_count"`
	LastModifiedTime     time.Time `json:"last_modified_time"`
}

type businessHoursView struct {
	configCommon
	BusinessHoursBitmap string `json:"business_hours_bitmap"`
	Timezone            string `json:"timezone"`
}

type geolocationView struct {
	configCommon
	Countries                    []string `json:"countries"`
	IsUnknownIPLocationsIncluded bool     `json:"is_unknown_ip_locations_included"`
}

type ipSourceView struct {
	configCommon
	IsTrustedSource bool                 `json:"is_trusted_source"`
	IPAddresses     string               `json:"ip_addresses"`
	IPAddressRanges []protection.IPRange `json:"ip_address_ranges"`
}

func newConfigView(c *protection.ConditionConfig) any {
	common := configCommon{ID: models.FormatID(c.ID), DisplayName: c.DisplayName, CAPoliciesUsageCount: c.UsageCount, LastModifiedTime: c.UpdatedAt}
	switch c.Family {
	case protection.FamilyBusinessHours:
		return businessHoursView{common, c.BusinessHoursBitmap, c.Timezone}
	case protection.FamilyGeolocations:
		return geolocationView{common, nonNil(c.Countries), c.IsUnknownIPLocationsIncluded}
	default:
		ranges := c.IPAddressRanges
		if ranges == nil {
			ranges = []protection.IPRange{}
		}
		return ipSourceView{common, c.IsTrustedSource, c.IPAddresses, ranges}
	}
}

// Requests of each family: its writable fields, nothing else.
type businessHoursRequest struct {
	DisplayName         string `json:"display_name"`
	BusinessHoursBitmap string `json:"business_hours_bitmap"`
	Timezone            string `json:"timezone"`
}

type geolocationRequest struct {
	DisplayName                  string   `json:"display_name"`
	Countries                    []string `json:"countries"`
	IsUnknownIPLocationsIncluded bool     `json:"is_unknown_ip_locations_included"`
}

type ipSourceRequest struct {
	DisplayName     string               `json:"display_name"`
	IsTrustedSource bool                 `json:"is_trusted_source"`
	IPAddresses     string               `json:"ip_addresses"`
	IPAddressRanges []protection.IPRange `json:"ip_address_ranges"`
}

// configRequest returns an empty request of family f and the function that
// turns it into a config.
func configRequest(f protection.ConfigFamily) (any, func() *protection.ConditionConfig) {
	switch f {
	case protection.FamilyBusinessHours:
		r := &businessHoursRequest{}
		return r, func() *protection.ConditionConfig {
			return &protection.ConditionConfig{Family: f, DisplayName: r.DisplayName, BusinessHoursBitmap: r.BusinessHoursBitmap, Timezone: r.Timezone}
		}
	case protection.FamilyGeolocations:
		r := &geolocationRequest{}
		return r, func() *protection.ConditionConfig {
			return &protection.ConditionConfig{Family: f, DisplayName: r.DisplayName, Countries: r.Countries, IsUnknownIPLocationsIncluded: r.IsUnknownIPLocationsIncluded}
		}
	default:
		r := &ipSourceRequest{}
		return r, func() *protection.ConditionConfig {
			return &protection.ConditionConfig{Family: f, DisplayName: r.DisplayName, IsTrustedSource: r.IsTrustedSource, IPAddresses: r.IPAddresses, IPAddressRanges: r.IPAddressRanges}
		}
	}
}

func pathFamily(c *gin.Context) (protection.ConfigFamily, error) {
	return protection.ParseFamily(c.Param("family"))
}

// listConfigs: GET /protection/conditionalfactor-configs/{family} (offset
// paging, by display name).
func (s *Server) listConfigs(c *gin.Context) error {
	f, err := pathFamily(c)
	if err != nil {
		return err
	}
	params, err := listing.Parse(c.Request.URL.Query(), protection.ConditionConfigListing(f))
	if err != nil {
		return err
	}
	list, meta, err := s.store.ConditionConfigs.List(c.Request.Context(), principal(c).OrgID, f, params)
	if err != nil {
		return err
	}
	var data any
	switch f {
	case protection.FamilyBusinessHours:
		data = projectConfigs[businessHoursView](list, params.Fields)
	case protection.FamilyGeolocations:
		data = projectConfigs[geolocationView](list, params.Fields)
	default:
		data = projectConfigs[ipSourceView](list, params.Fields)
	}
	c.JSON(http.StatusOK, gin.H{"data": data, "meta": meta})
	return nil
}

func projectConfigs[V any](list []protection.ConditionConfig, fields []string) any {
	views := make([]V, len(list))
	for i := range list {
		views[i] = newConfigView(&list[i]).(V)
	}
	return listing.Project(views, fields)
}

// createConfig: POST .../{family}, 201 with the config at top level (spec
// 4.3: no data wrapper).
func (s *Server) createConfig(c *gin.Context) error {
	f, err := pathFamily(c)
	if err != nil {
		return err
	}
	req, build := configRequest(f)
	if err := decodeJSON(c, req); err != nil {
		return err
	}
	cfg := build()
	cfg.OrgID = principal(c).OrgID
	if err := s.store.ConditionConfigs.Create(c.Request.Context(), cfg); err != nil {
		return err
	}
	c.JSON(http.StatusCreated, newConfigView(cfg))
	return nil
}

// getConfig: GET .../{family}/{config_id}, {data: config}.
func (s *Server) getConfig(c *gin.Context) error {
	f, err := pathFamily(c)
	if err != nil {
		return err
	}
	id, err := pathID(c, "config_id", protection.ErrConfigNotFound)
	if err != nil {
		return err
	}
	cfg, err := s.store.ConditionConfigs.Get(c.Request.Context(), principal(c).OrgID, f, id)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, gin.H{"data": newConfigView(cfg)})
	return nil
}

// updateConfig: PATCH .../{family}/{config_id}, a JSON merge patch over
// the config's writable fields; {data: config}.
func (s *Server) updateConfig(c *gin.Context) error {
	f, err := pathFamily(c)
	if err != nil {
		return err
	}
	id, err := pathID(c, "config_id", protection.ErrConfigNotFound)
	if err != nil {
		return err
	}
	patch, err := decodePatch(c)
	if err != nil {
		return err
	}
	cfg, err := s.store.ConditionConfigs.Update(c.Request.Context(), principal(c).OrgID, f, id, func(cur *protection.ConditionConfig) (*protection.ConditionConfig, error) {
		req, build := configRequest(f)
		mergeErr := mergeRequest(newConfigView(cur), patch, func(doc, _ map[string]any) {
			for _, k := range []string{"id", "ca_policies_usage_count", "last_modified_time"} {
				delete(doc, k)
			}
		}, req)
		if mergeErr != nil {
			return nil, mergeErr
		}
		return build(), nil
	})
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, gin.H{"data": newConfigView(cfg)})
	return nil
}

// deleteConfigs: DELETE .../{family}?ids=…, 200 with one item per id: 204
// deleted, 404 "Conditional Factor Config Not Found", 409 naming the
// policies that use it.
func (s *Server) deleteConfigs(c *gin.Context) error {
	f, err := pathFamily(c)
	if err != nil {
		return err
	}
	raw, err := bulkIDs(c)
	if err != nil {
		return err
	}
	return s.bulkResults(c, raw, protection.ErrConfigNotFound, func(ctx context.Context, orgID int64, ids []int64) (map[int64]error, error) {
		return s.store.ConditionConfigs.DeleteMany(ctx, orgID, f, ids)
	})
}

// bulkResults answers a bulk delete whose store says per id what became of
// it (nil: deleted, else the item's error). Ids that are not ids get
// notFound.
func (s *Server) bulkResults(c *gin.Context, raw []string, notFound error, deleteMany func(ctx context.Context, orgID int64, ids []int64) (map[int64]error, error)) error {
	parsed := make([]int64, len(raw))
	var ids []int64
	for i, r := range raw {
		if id, err := models.ParseID("ids", r); err == nil {
			parsed[i] = id
			ids = append(ids, id)
		}
	}
	res, err := deleteMany(c.Request.Context(), principal(c).OrgID, ids)
	if err != nil {
		return err
	}
	out := make([]bulkResult, len(raw))
	for i, r := range raw {
		itemErr, ok := res[parsed[i]]
		if !ok {
			itemErr = notFound
		}
		out[i] = bulkResult{ResourceID: r, Status: http.StatusNoContent}
		if itemErr != nil {
			var me *models.Error
			if !errors.As(itemErr, &me) {
				return itemErr
			}
			ae := toAPIError(itemErr)
			out[i].Status, out[i].Error = ae.Status, &ae.Body
		}
	}
	c.JSON(http.StatusOK, out)
	return nil
}
