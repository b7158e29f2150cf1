package api

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"iam/models"
	"iam/models/enrollment"
)

// Certificate authority configs of the smart card factor config (spec 2.10,
// 4.3): multipart create and PATCH, list, get, delete.

const caConfigsPath = "/protection/authnfactor-configs/:authnfactor_config_id/ca-configs"

// caMaxBody bounds a CA config form: the file and a few short fields.
const caMaxBody = enrollment.MaxCAFileBytes + 64<<10

type caConfigView struct {
	ID                          string    `json:"id"`
	AuthnFactorConfigID         string    `json:"authn_factor_config_id"`
	IsEnabled                   bool      `json:"is_enabled"`
	CAFile                      string    `json:"ca_file"`
	SubjectName                 string    `json:"subject_name"`
	Thumbprint                  string    `json:"thumbprint"`
	CertificateMappingAttribute string    `json:"certificate_mapping_attribute"`
	ExpiresOn                   time.Time `json:"expires_on"`
	AddedTime                   time.Time `json:"added_time"`
}

func newCAConfigView(c *enrollment.CAConfig) caConfigView {
	return caConfigView{ID: models.FormatID(c.ID), AuthnFactorConfigID: models.FormatID(c.FactorConfigID), IsEnabled: c.IsEnabled,
		CAFile: c.PEM(), SubjectName: c.SubjectName, Thumbprint: c.Thumbprint, CertificateMappingAttribute: c.MappingAttribute,
		ExpiresOn: c.ExpiresOn, AddedTime: c.AddedTime}
}

// readCAForm reads the multipart form: is_enabled (true or false),
// certificate_mapping_attribute, and the ca_file part (at most
// models.MaxCAFileBytes). Absent fields stay nil.
func readCAForm(c *gin.Context) (enrollment.CAInput, error) {
	var in enrollment.CAInput
	mt, _, err := mime.ParseMediaType(c.GetHeader("Content-Type"))
	if err != nil || mt != "multipart/form-data" {
		return in, newAPIError(http.StatusUnsupportedMediaType, CodeMediaType, "Unsupported Media Type", "the request body must be multipart/form-data")
	}
	mr, err := c.Request.MultipartReader()
	if err != nil {
		return in, errInvalidBody("the multipart body cannot be read: %v", err)
	}
	seen := map[string]bool{}
	for parts := 0; ; parts++ {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return in, uploadReadError(err)
		}
		if parts >= 8 {
			return in, errInvalidBody("the form has more than 8 parts")
		}
		name := part.FormName()
		if seen[name] {
			return in, models.Invalid(name, "is given twice")
		}
		seen[name] = true
		limit := int64(1024)
		if name == "ca_file" {
			limit = enrollment.MaxCAFileBytes
		}
		data, err := io.ReadAll(io.LimitReader(part, limit+1))
		if err != nil {
			return in, uploadReadError(err)
		}
		if int64(len(data)) > limit {
			if name == "ca_file" {
				return in, &models.Error{Code: models.ETOOLARGE, Field: "ca_file", Detail: fmt.Sprintf("the file is larger than %d KiB", limit>>10)}
			}
			return in, models.Invalid(name, "is longer than %d bytes", limit)
		}
		switch name {
		case "ca_file":
			if data == nil {
				data = []byte{}
			}
			in.File = data
		case "is_enabled":
			b, err := strconv.ParseBool(string(data))
			if err != nil {
				return in, models.Invalid("is_enabled", "must be true or false")
			}
			in.IsEnabled = &b
		case "certificate_mapping_attribute":
			s := string(data)
			if problem := textProblem(s); problem != "" {
				return in, models.Invalid(name, "%s", problem)
			}
			in.MappingAttribute = &s
		default:
			return in, models.Invalid(name, "is not a field of a CA config (is_enabled, ca_file, certificate_mapping_attribute)")
		}
	}
	return in, nil
}

func caPathIDs(c *gin.Context, withCA bool) (factorID, caID int64, err error) {
	if factorID, err = pathID(c, "authnfactor_config_id", enrollment.ErrFactorConfigNotFound); err != nil {
		return
	}
	if withCA {
		caID, err = pathID(c, "ca_config_id", enrollment.ErrCAConfigNotFound)
	}
	return
}

// createCAConfig: POST .../ca-configs (multipart), 201 {data: CA config}.
func (s *Server) createCAConfig(c *gin.Context) error {
	factorID, _, err := caPathIDs(c, false)
	if err != nil {
		return err
	}
	// The ids are checked before the body is read: no form for nothing.
	if err = s.store.CAs.CheckFactor(c.Request.Context(), principal(c).OrgID, factorID); err != nil {
		return err
	}
	in, err := readCAForm(c)
	if err != nil {
		return err
	}
	ca, err := s.store.CAs.Create(c.Request.Context(), principal(c).OrgID, factorID, in)
	if err != nil {
		return err
	}
	c.JSON(http.StatusCreated, gin.H{"data": newCAConfigView(ca)})
	return nil
}

// listCAConfigs: GET .../ca-configs, {data: [CA config]} oldest first.
func (s *Server) listCAConfigs(c *gin.Context) error {
	factorID, _, err := caPathIDs(c, false)
	if err != nil {
		return err
	}
	list, err := s.store.CAs.List(c.Request.Context(), principal(c).OrgID, factorID)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, gin.H{"data": viewsOf(list, newCAConfigView)})
	return nil
}

// getCAConfig: GET .../ca-configs/{ca_config_id}.
func (s *Server) getCAConfig(c *gin.Context) error {
	factorID, id, err := caPathIDs(c, true)
	if err != nil {
		return err
	}
	ca, err := s.store.CAs.Get(c.Request.Context(), principal(c).OrgID, factorID, id)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, gin.H{"data": newCAConfigView(ca)})
	return nil
}

// updateCAConfig: PATCH .../ca-configs/{ca_config_id} (multipart): the
// fields given change.
func (s *Server) updateCAConfig(c *gin.Context) error {
	factorID, id, err := caPathIDs(c, true)
	if err != nil {
		return err
	}
	if _, err = s.store.CAs.Get(c.Request.Context(), principal(c).OrgID, factorID, id); err != nil {
		return err
	}
	in, err := readCAForm(c)
	if err != nil {
		return err
	}
	ca, err := s.store.CAs.Update(c.Request.Context(), principal(c).OrgID, factorID, id, in)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, gin.H{"data": newCAConfigView(ca)})
	return nil
}

// deleteCAConfig: DELETE .../ca-configs/{ca_config_id}, 204.
func (s *Server) deleteCAConfig(c *gin.Context) error {
	factorID, id, err := caPathIDs(c, true)
	if err != nil {
		return err
	}
	if err := s.store.CAs.Delete(c.Request.Context(), principal(c).OrgID, factorID, id); err != nil {
		return err
	}
	c.Status(http.StatusNoContent)
	return nil
}
