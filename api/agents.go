package api

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"iam/models"
	"iam/models/devices"
	"iam/models/listing"
)

// Agent packages live in IAM_AGENT_PACKAGES_DIR, one file per agent type
// (and platform for the device agent) and version:
//
//	DeviceAgent-<windows|macos|linux>-<version>.<ext>
//	NPSExtension-<version>.<ext>
//	IISModule-<version>.<ext>
//
// version is dotted numbers (1.4.2); ext is the package's extension (msi,
// pkg, deb, tar.gz ...). The highest version of each is the current one: it
// is downloaded, shown in agents-info, and a device agent of another
// version is outdated.
var packageName = regexp.MustCompile(`^(DeviceAgent-(?:windows|macos|linux)|NPSExtension|IISModule)-([0-9]+(?:\.[0-9]+){0,3})\.([A-Za-z][A-Za-z0-9]*(?:\.[A-Za-z0-9]+)?)$`)

// agentPackages reads the packages folder.
type agentPackages struct{ dir string }

type agentPackage struct {
	file, version string
}

// current returns the current package of each "<type>" or
// "DeviceAgent-<platform>".
func (p agentPackages) current() map[string]agentPackage {
	out := map[string]agentPackage{}
	if p.dir == "" {
		return out
	}
	entries, err := os.ReadDir(p.dir)
	if err != nil {
		return out
	}
	for _, e := range entries {
		m := packageName.FindStringSubmatch(e.Name())
		if m == nil || !e.Type().IsRegular() {
			continue
		}
		if cur, ok := out[m[1]]; !ok || versionLess(cur.version, m[2]) {
			out[m[1]] = agentPackage{file: e.Name(), version: m[2]}
		}
	}
	return out
}

// versions are the current device agent versions by platform.
func (p agentPackages) versions() devices.AgentVersions {
	out := devices.AgentVersions{}
	for key, pkg := range p.current() {
		if plat, ok := strings.CutPrefix(key, devices.AgentDevice+"-"); ok {
			out[plat] = pkg.version
		}
	}
	return out
}

func versionLess(a, b string) bool {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < max(len(as), len(bs)); i++ {
		var x, y int
		if i < len(as) {
			x, _ = strconv.Atoi(as[i])
		}
		if i < len(bs) {
			y, _ = strconv.Atoi(bs[i])
		}
		if x != y {
			return x < y
		}
	}
	return false
}

type installDetails struct {
	Status            string `json:"status"`
	InstalledCount    *int64 `json:"installed_count,omitempty"`
	TotalDevicesCount *int64 `json:"total_devices_count,omitempty"`
}

type agentPlatformView struct {
	Name                string         `json:"name"`
	DownloadURL         string         `json:"download_url"`
	Version             string         `json:"version"`
	InstallationKey     string         `json:"installation_key"`
	InstallationDetails installDetails `json:"installation_details"`
}

type agentView struct {
	Type                string              `json:"type"`
	DisplayName         string              `json:"display_name"`
	EndpointName        string              `json:"endpoint_name"`
	DownloadURL         string              `json:"download_url"`
	Version             string              `json:"version"`
	InstallationKey     string              `json:"installation_key"`
	InstallationDetails installDetails      `json:"installation_details"`
	Platforms           []agentPlatformView `json:"platforms,omitempty"`
}

var agentNames = map[string][2]string{
	devices.AgentDevice: {"Device Agent", "Windows, macOS and Linux devices"},
	devices.AgentNPS:    {"NPS Extension", "Network Policy Server"},
	devices.AgentIIS:    {"IIS Module", "IIS web server"},
}

func downloadURL(agentType, platform string) string {
	u := "/api/v1/protection/agents-info/" + agentType + "/download"
	if platform != "" {
		u += "?platform=" + url.QueryEscape(platform)
	}
	return u
}

func status(installed bool) string {
	if installed {
		return "installed"
	}
	return "not_installed"
}

// agentsInfo: GET /protection/agents-info, every agent type with its
// version, download address, installation key and installations.
func (s *Server) agentsInfo(c *gin.Context) error {
	ctx := c.Request.Context()
	org := principal(c).OrgID
	counts, err := s.store.Devices.PlatformCounts(ctx, org)
	if err != nil {
		return err
	}
	installs, err := s.store.Devices.InstallationCounts(ctx, org)
	if err != nil {
		return err
	}
	pkgs := s.packages.current()
	out := make([]agentView, 0, len(devices.AgentTypes))
	for _, typ := range devices.AgentTypes {
		key, err := s.store.Devices.InstallKey(ctx, org, typ)
		if err != nil {
			return err
		}
		v := agentView{Type: typ, DisplayName: agentNames[typ][0], EndpointName: agentNames[typ][1],
			DownloadURL: downloadURL(typ, ""), Version: pkgs[typ].version, InstallationKey: key,
			InstallationDetails: installDetails{Status: status(installs[typ] > 0)}}
		if typ == devices.AgentDevice {
			var any bool
			for _, plat := range devices.DevicePlatforms {
				n := counts[plat]
				installed, total := n.Installed, n.Total
				any = any || installed > 0
				v.Platforms = append(v.Platforms, agentPlatformView{Name: plat, DownloadURL: downloadURL(typ, plat),
					Version: pkgs[typ+"-"+plat].version, InstallationKey: key,
					InstallationDetails: installDetails{Status: status(installed > 0), InstalledCount: &installed, TotalDevicesCount: &total}})
			}
			v.InstallationDetails.Status = status(any)
		}
		out = append(out, v)
	}
	c.JSON(http.StatusOK, gin.H{"data": out})
	return nil
}

func agentType(c *gin.Context) (string, error) {
	t := c.Param("agent_type")
	for _, known := range devices.AgentTypes {
		if t == known {
			return t, nil
		}
	}
	return "", models.NotFound("Agent", fmt.Sprintf("no agent type %q; the types are %v", t, devices.AgentTypes))
}

// regenerateInstallKey: POST /protection/agents-info/{agent_type}/regenerate-install-key.
func (s *Server) regenerateInstallKey(c *gin.Context) error {
	typ, err := agentType(c)
	if err != nil {
		return err
	}
	key, err := s.store.Devices.RegenerateInstallKey(c.Request.Context(), principal(c).OrgID, typ)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, gin.H{"data": gin.H{"installation_key": key}})
	return nil
}

// downloadAgent: GET /protection/agents-info/{agent_type}/download
// (?platform= for the device agent) streams the current package, with
// Content-Disposition and its SHA-256 in X-Checksum-SHA256.
func (s *Server) downloadAgent(c *gin.Context) error {
	typ, err := agentType(c)
	if err != nil {
		return err
	}
	key := typ
	if typ == devices.AgentDevice {
		plat := c.Query("platform")
		found := false
		for _, p := range devices.DevicePlatforms {
			found = found || p == plat
		}
		if !found {
			return &listing.ParamError{Param: "platform", Detail: fmt.Sprintf("is required for the device agent: one of %v", devices.DevicePlatforms)}
		}
		key += "-" + plat
	}
	pkg, ok := s.packages.current()[key]
	if !ok {
		return models.NotFound("Agent Package", fmt.Sprintf("no %s package is installed on the server (a file %s-<version>.<ext> in IAM_AGENT_PACKAGES_DIR)", key, key))
	}
	f, err := os.Open(filepath.Join(s.packages.dir, pkg.file))
	if err != nil {
		return models.NotFound("Agent Package", "the "+key+" package cannot be read")
	}
	defer func() { _ = f.Close() }() // only read: a failed close loses nothing
	h := sha256.New()
	size, err := io.Copy(h, f)
	if err != nil {
		return err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	c.Header("Content-Disposition", `attachment; filename="`+pkg.file+`"`)
	c.Header("X-Checksum-SHA256", hex.EncodeToString(h.Sum(nil)))
	c.Header("X-Agent-Version", pkg.version)
	c.DataFromReader(http.StatusOK, size, "application/octet-stream", f, nil)
	return nil
}
