package protection

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/uptrace/bun"

	"iam/models"
	"iam/models/audit"
	"iam/models/listing"
	"iam/models/sqldb"
)

// ConfigFamily is a family of condition configs, as its path segment.
type ConfigFamily string

// The three families of condition configs (spec 2.7–2.9) and the condition
// factor type that names each.
const (
	FamilyBusinessHours ConfigFamily = "businesshours"
	FamilyGeolocations  ConfigFamily = "geolocations"
	FamilyIPSources     ConfigFamily = "ipsources"
)

// ConfigFamilies lists the families in path order.
var ConfigFamilies = []ConfigFamily{FamilyBusinessHours, FamilyGeolocations, FamilyIPSources}

// ConfigLimits bound condition configs.
var ConfigLimits = struct {
	MaxNameLength  int // display_name, characters
	MaxAddresses   int // entries of ip_addresses
	MaxRanges      int // entries of ip_address_ranges
	MaxCountries   int // entries of countries (no repeats)
	MaxPerFamily   int // configs of one family in one organization
	MaxPolicyNames int // policies a 409 names
}{MaxNameLength: 100, MaxAddresses: 1000, MaxRanges: 1000, MaxCountries: 249, MaxPerFamily: 1000, MaxPolicyNames: 10}

// BusinessHoursBits is the length of a business hours bitmap: one character
// per hour of a week.
const BusinessHoursBits = 7 * 24

// ErrConfigNotFound answers a condition config id that the organization
// does not have in the family asked for.
var ErrConfigNotFound = models.NotFound("Conditional Factor Config", "the conditional factor config does not exist")

// IPRange is an inclusive range of addresses of one family.
type IPRange struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// ConditionConfig is a condition config of one family (spec 2.7–2.9). Only
// the fields of its family are meaningful; the others stay zero.
//
// BusinessHoursBitmap has BusinessHoursBits characters, '1' for an hour
// inside business hours: character 24*d + h is hour h (0–23) of day d of
// the week, d = 0 for Sunday to 6 for Saturday, in the config's Timezone
// (an IANA zone name). Hours are wall-clock hours: on a DST change the
// skipped hour never occurs and the repeated one is read twice.
type ConditionConfig struct {
	bun.BaseModel `bun:"table:ca_condition_configs,alias:cc"`

	ID          int64        `bun:"id,pk"`
	OrgID       int64        `bun:"org_id"`
	Family      ConfigFamily `bun:"family"`
	DisplayName string       `bun:"display_name"`

	BusinessHoursBitmap string `bun:"business_hours_bitmap"`
	Timezone            string `bun:"timezone"`

	Countries                    []string `bun:"countries,type:json"`
	IsUnknownIPLocationsIncluded bool     `bun:"is_unknown_ip_locations_included"`

	IsTrustedSource bool `bun:"is_trusted_source"`
	// IPAddresses is the canonical comma-separated list: addresses and
	// CIDR prefixes, comma and no blank between them.
	IPAddresses     string    `bun:"ip_addresses"`
	IPAddressRanges []IPRange `bun:"ip_address_ranges,type:json"`

	CreatedAt time.Time `bun:"created_at"`
	UpdatedAt time.Time `bun:"updated_at"`

	// UsageCount is how many policies have a condition naming the config,
	// counted from the condition rows on every read.
	UsageCount int64 `bun:"usage_count,scanonly"`
}

// usageCountExpr counts the policies naming cc (the table alias).
const usageCountExpr = "(SELECT COUNT(DISTINCT pcc.policy_id) FROM ca_policy_condition_configs AS pcc WHERE pcc.config_id = cc.id) AS usage_count"

// ParseFamily reads a family path segment. ENOTFOUND for anything else.
func ParseFamily(s string) (ConfigFamily, error) {
	f := ConfigFamily(s)
	if slices.Contains(ConfigFamilies, f) {
		return f, nil
	}
	return "", models.NotFound("Conditional Factor Config Family", "the family must be businesshours, geolocations or ipsources")
}

// Location returns the config's time zone.
func (c *ConditionConfig) Location() (*time.Location, error) {
	return time.LoadLocation(c.Timezone)
}

// InBusinessHours reports whether t falls in an hour the bitmap marks, read
// in the config's time zone.
func (c *ConditionConfig) InBusinessHours(t time.Time) (bool, error) {
	loc, err := c.Location()
	if err != nil {
		return false, err
	}
	if len(c.BusinessHoursBitmap) != BusinessHoursBits {
		return false, fmt.Errorf("business hours config %d: bitmap of %d characters", c.ID, len(c.BusinessHoursBitmap))
	}
	lt := t.In(loc)
	return c.BusinessHoursBitmap[int(lt.Weekday())*24+lt.Hour()] == '1', nil
}

// IPSet is an IP source config's addresses, prefixes and ranges, parsed.
type IPSet struct {
	Prefixes []netip.Prefix // single addresses as /32 or /128
	Ranges   [][2]netip.Addr
}

// Contains reports whether addr (unmapped from IPv4-in-IPv6 first) is in
// the set.
func (s *IPSet) Contains(addr netip.Addr) bool {
	addr = addr.Unmap().WithZone("")
	for _, p := range s.Prefixes {
		if p.Contains(addr) {
			return true
		}
	}
	for _, r := range s.Ranges {
		if r[0].BitLen() == addr.BitLen() && r[0].Compare(addr) <= 0 && addr.Compare(r[1]) <= 0 {
			return true
		}
	}
	return false
}

// IPSet parses an IP source config's addresses and ranges (stored in
// canonical form, so they parse).
func (c *ConditionConfig) IPSet() (*IPSet, error) {
	s := &IPSet{}
	if c.IPAddresses != "" {
		for _, item := range strings.Split(c.IPAddresses, ",") {
			p, err := parseAddrOrPrefix(item)
			if err != nil {
				return nil, fmt.Errorf("ip source config %d: %w", c.ID, err)
			}
			s.Prefixes = append(s.Prefixes, p)
		}
	}
	for _, r := range c.IPAddressRanges {
		from, err1 := netip.ParseAddr(r.From)
		to, err2 := netip.ParseAddr(r.To)
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("ip source config %d: %w", c.ID, err)
		}
		s.Ranges = append(s.Ranges, [2]netip.Addr{from.Unmap(), to.Unmap()})
	}
	return s, nil
}

// parseAddrOrPrefix reads an address (as a one-address prefix) or a CIDR
// prefix, masked: 10.1.2.3/8 is 10.0.0.0/8. IPv4-mapped IPv6 addresses are
// read as IPv4; zones are refused.
func parseAddrOrPrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("%q is not an address or CIDR prefix", s)
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return netip.Prefix{}, fmt.Errorf("%q is not an address or CIDR prefix", s)
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// ValidateConditionConfig checks c against the rules of its family and
// writes its values in canonical form: countries upper case without
// repeats, addresses and prefixes canonical (a lone address without its
// /32 or /128), ranges' addresses canonical. Fields of other families are
// cleared. Every broken field is a cause of the EINVALID error returned,
// one cause per field.
func ValidateConditionConfig(c *ConditionConfig) error {
	var p models.Problems
	c.DisplayName = strings.TrimSpace(c.DisplayName)
	switch n := utf8.RuneCountInString(c.DisplayName); {
	case n == 0:
		p.Add("display_name", "is required")
	case n > ConfigLimits.MaxNameLength:
		p.Add("display_name", "is longer than %d characters", ConfigLimits.MaxNameLength)
	}
	switch c.Family {
	case FamilyBusinessHours:
		c.Countries, c.IsUnknownIPLocationsIncluded = []string{}, false
		c.IsTrustedSource, c.IPAddresses, c.IPAddressRanges = false, "", []IPRange{}
		validateBitmap(&p, c.BusinessHoursBitmap)
		if c.Timezone == "" {
			p.Add("timezone", "is required: an IANA time zone name such as Europe/Paris")
		} else if loc, err := time.LoadLocation(c.Timezone); err != nil || strings.EqualFold(c.Timezone, "Local") {
			p.Add("timezone", "%q is not an IANA time zone name (such as Europe/Paris or UTC)", c.Timezone)
		} else {
			c.Timezone = loc.String()
		}
	case FamilyGeolocations:
		c.BusinessHoursBitmap, c.Timezone = "", ""
		c.IsTrustedSource, c.IPAddresses, c.IPAddressRanges = false, "", []IPRange{}
		c.Countries = validateCountries(&p, c.Countries)
		if len(c.Countries) == 0 && !c.IsUnknownIPLocationsIncluded && p.None() {
			p.Add("countries", "name at least one country, or include unknown IP locations")
		}
	case FamilyIPSources:
		c.BusinessHoursBitmap, c.Timezone = "", ""
		c.Countries, c.IsUnknownIPLocationsIncluded = []string{}, false
		c.IPAddresses = validateAddresses(&p, c.IPAddresses)
		c.IPAddressRanges = validateRanges(&p, c.IPAddressRanges)
		if c.IPAddresses == "" && len(c.IPAddressRanges) == 0 && p.None() {
			p.Add("ip_addresses", "name at least one address, CIDR prefix or range")
		}
	default:
		p.Add("family", "must be businesshours, geolocations or ipsources")
	}
	return p.Result()
}

func validateBitmap(p *models.Problems, bitmap string) {
	if len(bitmap) != BusinessHoursBits {
		p.Add("business_hours_bitmap", "must be %d characters of 0 and 1, one per hour of the week from Sunday 00:00 (24 × 7); got %d characters",
			BusinessHoursBits, utf8.RuneCountInString(bitmap))
		return
	}
	if i := strings.IndexFunc(bitmap, func(r rune) bool { return r != '0' && r != '1' }); i >= 0 {
		p.Add("business_hours_bitmap", "must hold only 0 and 1; character %d is not", i+1)
	}
}

func validateCountries(p *models.Problems, in []string) []string {
	out := []string{}
	seen := map[string]bool{}
	var bad []string
	for _, raw := range in {
		code := strings.ToUpper(strings.TrimSpace(raw))
		switch {
		case !IsCountryCode(code):
			bad = append(bad, fmt.Sprintf("%q", raw))
		case !seen[code]:
			seen[code] = true
			out = append(out, code)
		}
	}
	switch {
	case len(in) > ConfigLimits.MaxCountries:
		p.Add("countries", "holds more than %d entries", ConfigLimits.MaxCountries)
	case len(bad) > 0:
		p.Add("countries", "%s %s not ISO 3166-1 alpha-2 country code(s)", firstFew(bad), isAre(len(bad)))
	}
	return out
}

func validateAddresses(p *models.Problems, in string) string {
	if strings.TrimSpace(in) == "" {
		return ""
	}
	items := strings.Split(in, ",")
	if len(items) > ConfigLimits.MaxAddresses {
		p.Add("ip_addresses", "holds more than %d entries", ConfigLimits.MaxAddresses)
		return in
	}
	var out, bad []string
	seen := map[string]bool{}
	for _, raw := range items {
		item := strings.TrimSpace(raw)
		if item == "" {
			continue
		}
		pre, err := parseAddrOrPrefix(item)
		if err != nil {
			bad = append(bad, fmt.Sprintf("%q", item))
			continue
		}
		s := pre.String()
		if pre.IsSingleIP() {
			s = pre.Addr().String()
		}
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	if len(bad) > 0 {
		p.Add("ip_addresses", "%s %s not IPv4 or IPv6 address(es) or CIDR prefix(es)", firstFew(bad), isAre(len(bad)))
		return in
	}
	return strings.Join(out, ",")
}

func validateRanges(p *models.Problems, in []IPRange) []IPRange {
	out := []IPRange{}
	if len(in) > ConfigLimits.MaxRanges {
		p.Add("ip_address_ranges", "holds more than %d entries", ConfigLimits.MaxRanges)
		return in
	}
	for i, r := range in {
		from, err1 := netip.ParseAddr(strings.TrimSpace(r.From))
		to, err2 := netip.ParseAddr(strings.TrimSpace(r.To))
		switch {
		case err1 != nil || from.Zone() != "":
			p.Add("ip_address_ranges", "entry %d: from %q is not an IPv4 or IPv6 address", i+1, r.From)
		case err2 != nil || to.Zone() != "":
			p.Add("ip_address_ranges", "entry %d: to %q is not an IPv4 or IPv6 address", i+1, r.To)
		case from.Unmap().Is4() != to.Unmap().Is4():
			p.Add("ip_address_ranges", "entry %d: from %s and to %s are not of the same family", i+1, r.From, r.To)
		case from.Unmap().Compare(to.Unmap()) > 0:
			p.Add("ip_address_ranges", "entry %d: from %s is after to %s", i+1, r.From, r.To)
		default:
			out = append(out, IPRange{From: from.Unmap().String(), To: to.Unmap().String()})
			continue
		}
		return in // one cause per field: the first broken entry
	}
	return out
}

// firstFew lists up to five items, then how many more.
func firstFew(items []string) string {
	if len(items) <= 5 {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:5], ", "), len(items)-5)
}

func isAre(n int) string {
	if n == 1 {
		return "is"
	}
	return "are"
}

// ConditionConfigListing returns the allow-list of a family's list: offset
// paging, by display name, 100 a page.
func ConditionConfigListing(f ConfigFamily) *listing.Schema { return configListings[f] }

var configListings = func() map[ConfigFamily]*listing.Schema {
	common := []listing.Attribute{
		{Name: "id", Column: "cc.id", Type: listing.TypeID, Filter: true},
		{Name: "display_name", Column: "cc.display_name", Type: listing.TypeString, Filter: true, Sort: true},
		{Name: "ca_policies_usage_count"},
		{Name: "last_modified_time", Column: "cc.updated_at", Type: listing.TypeTime, Filter: true, Sort: true},
	}
	own := map[ConfigFamily][]listing.Attribute{
		FamilyBusinessHours: {
			{Name: "business_hours_bitmap"},
			{Name: "timezone", Column: "cc.timezone", Type: listing.TypeString, Filter: true, Sort: true},
		},
		FamilyGeolocations: {
			{Name: "countries"},
			{Name: "is_unknown_ip_locations_included", Column: "cc.is_unknown_ip_locations_included", Type: listing.TypeBoolean, Filter: true},
		},
		FamilyIPSources: {
			{Name: "is_trusted_source", Column: "cc.is_trusted_source", Type: listing.TypeBoolean, Filter: true},
			{Name: "ip_addresses"},
			{Name: "ip_address_ranges"},
		},
	}
	out := map[ConfigFamily]*listing.Schema{}
	for f, attrs := range own {
		out[f] = listing.MustSchema(listing.Schema{
			Name:        "conditional_factor_configs_" + string(f),
			Attributes:  append(slices.Clone(common), attrs...),
			DefaultSort: "display_name",
			Paging:      listing.OffsetPaging,
		})
	}
	return out
}()

// ConditionConfigStore holds the condition configs.
type ConditionConfigStore struct{ db bun.IDB }

// NewConditionConfigStore returns the ConditionConfigStore over db (the database or a transaction).
func NewConditionConfigStore(db bun.IDB) *ConditionConfigStore { return &ConditionConfigStore{db: db} }

func (s *ConditionConfigStore) query(db bun.IDB, dest any, orgID int64, f ConfigFamily) *bun.SelectQuery {
	return db.NewSelect().Model(dest).ColumnExpr("cc.*").ColumnExpr(usageCountExpr).
		Where("cc.org_id = ? AND cc.family = ?", orgID, f)
}

// List returns a page of the organization's configs of family f.
func (s *ConditionConfigStore) List(ctx context.Context, orgID int64, f ConfigFamily, p listing.Params) ([]ConditionConfig, listing.Meta, error) {
	var out []ConditionConfig
	meta, err := listing.Fetch(ctx, s.query(s.db, &out, orgID, f), &out, ConditionConfigListing(f), p)
	return out, meta, err
}

// Get returns one config of family f. ErrConfigNotFound otherwise.
func (s *ConditionConfigStore) Get(ctx context.Context, orgID int64, f ConfigFamily, id int64) (*ConditionConfig, error) {
	return s.get(ctx, s.db, orgID, f, id, false)
}

func (s *ConditionConfigStore) get(ctx context.Context, db bun.IDB, orgID int64, f ConfigFamily, id int64, forUpdate bool) (*ConditionConfig, error) {
	c := new(ConditionConfig)
	q := s.query(db, c, orgID, f).Where("cc.id = ?", id)
	if forUpdate {
		q = sqldb.DialectOf(db).LockRows(q, "UPDATE")
	}
	err := q.Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrConfigNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("select condition config: %w", err)
	}
	return c, nil
}

// Create checks c (ValidateConditionConfig) and inserts it, filling its id
// and times. EINVALID, or ECONFLICT when the display name is taken in the
// family or the family holds ConfigLimits.MaxPerFamily configs.
func (s *ConditionConfigStore) Create(ctx context.Context, c *ConditionConfig) error {
	if err := ValidateConditionConfig(c); err != nil {
		return err
	}
	c.ID = sqldb.NewID()
	now := time.Now().UTC()
	c.CreatedAt, c.UpdatedAt, c.UsageCount = now, now, 0
	return sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		n, err := tx.NewSelect().Model((*ConditionConfig)(nil)).Where("org_id = ? AND family = ?", c.OrgID, c.Family).Count(ctx)
		if err != nil {
			return fmt.Errorf("count condition configs: %w", err)
		}
		if n >= int64(ConfigLimits.MaxPerFamily) {
			return &models.Error{Code: models.ECONFLICT, Detail: fmt.Sprintf("the organization has %d %s configs, the most it may have", n, c.Family)}
		}
		if _, err := tx.NewInsert().Model(c).Exec(ctx); err != nil {
			return configWriteError(err)
		}
		if err := record(ctx, c.OrgID, audit.ConditionConfigCreated, configTarget(c)); err != nil {
			return err
		}
		// A trusted IP source joins include_all_trusted_sources conditions.
		return BumpProtectionVersion(ctx, tx, c.OrgID)
	})
}

// Update changes a config of family f: change receives the current config
// and returns the new one, which is checked and written in the same
// transaction. ErrConfigNotFound, EINVALID, ECONFLICT as Create.
func (s *ConditionConfigStore) Update(ctx context.Context, orgID int64, f ConfigFamily, id int64, change func(cur *ConditionConfig) (*ConditionConfig, error)) (*ConditionConfig, error) {
	var out *ConditionConfig
	err := sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		cur, err := s.get(ctx, tx, orgID, f, id, true)
		if err != nil {
			return err
		}
		before, was := *cur, configSnapshot(cur)
		next, err := change(cur)
		if err != nil {
			return err
		}
		next.ID, next.OrgID, next.Family, next.CreatedAt, next.UsageCount = before.ID, before.OrgID, before.Family, before.CreatedAt, before.UsageCount
		if err := ValidateConditionConfig(next); err != nil {
			return err
		}
		next.UpdatedAt = time.Now().UTC()
		if _, err := tx.NewUpdate().Model(next).WherePK().Exec(ctx); err != nil {
			return configWriteError(err)
		}
		if err := record(ctx, orgID, audit.ConditionConfigUpdated, withChanges(configTarget(next), was, configSnapshot(next))); err != nil {
			return err
		}
		out = next
		return BumpProtectionVersion(ctx, tx, orgID)
	})
	return out, err
}

// DeleteMany deletes the configs of family f named by ids, in one
// transaction, and says per id what became of it: nil when deleted,
// ErrConfigNotFound when the organization has no such config in f, and an
// ECONFLICT error naming the policies when a policy's condition names it.
func (s *ConditionConfigStore) DeleteMany(ctx context.Context, orgID int64, f ConfigFamily, ids []int64) (map[int64]error, error) {
	var out map[int64]error
	err := sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		out = make(map[int64]error, len(ids))
		if len(ids) == 0 {
			return nil
		}
		var rows []struct {
			ID          int64  `bun:"id"`
			DisplayName string `bun:"display_name"`
		}
		q := tx.NewSelect().Model((*ConditionConfig)(nil)).Column("id", "display_name").Where("org_id = ? AND family = ? AND id IN (?)", orgID, f, bun.List(ids)).OrderExpr("id")
		if err := sqldb.DialectOf(tx).LockRows(q, "UPDATE").Scan(ctx, &rows); err != nil {
			return fmt.Errorf("select condition configs: %w", err)
		}
		found := make([]int64, len(rows))
		name := make(map[int64]string, len(rows))
		for i, r := range rows {
			found[i], name[r.ID] = r.ID, r.DisplayName
		}
		var users []struct {
			ConfigID int64  `bun:"config_id"`
			Name     string `bun:"name"`
		}
		err := tx.NewSelect().TableExpr("ca_policy_condition_configs AS pcc").
			Join("JOIN ca_policies AS p ON p.id = pcc.policy_id").
			ColumnExpr("DISTINCT pcc.config_id, p.name").
			Where("pcc.org_id = ? AND pcc.config_id IN (?)", orgID, bun.List(ids)).
			OrderExpr("pcc.config_id, p.name").Scan(ctx, &users)
		if err != nil {
			return fmt.Errorf("select policies of condition configs: %w", err)
		}
		names := map[int64][]string{}
		for _, u := range users {
			names[u.ConfigID] = append(names[u.ConfigID], u.Name)
		}
		var free []int64
		var targets []models.EventTarget
		for _, id := range ids {
			out[id] = ErrConfigNotFound
		}
		for _, id := range found {
			if n := names[id]; len(n) > 0 {
				out[id] = configInUse(n)
				continue
			}
			out[id] = nil
			free = append(free, id)
			targets = append(targets, audit.Target(ConditionConfigTargetType, id, name[id]))
		}
		if len(free) == 0 {
			return nil
		}
		if _, err := tx.NewDelete().Model((*ConditionConfig)(nil)).Where("org_id = ? AND id IN (?)", orgID, bun.List(free)).Exec(ctx); err != nil {
			return fmt.Errorf("delete condition configs: %w", err)
		}
		if err := recordBulk(ctx, orgID, audit.ConditionConfigDeleted, nil, targets); err != nil {
			return err
		}
		return BumpProtectionVersion(ctx, tx, orgID)
	})
	return out, err
}

func configInUse(names []string) error {
	quoted := make([]string, 0, len(names))
	for i, n := range names {
		if i == ConfigLimits.MaxPolicyNames {
			break
		}
		quoted = append(quoted, fmt.Sprintf("%q", n))
	}
	detail := "the config is used by the conditional access polic"
	if len(names) == 1 {
		detail += "y "
	} else {
		detail += "ies "
	}
	detail += strings.Join(quoted, ", ")
	if extra := len(names) - len(quoted); extra > 0 {
		detail += fmt.Sprintf(" and %d more", extra)
	}
	return &models.Error{Code: models.ECONFLICT, Title: "Conditional Factor Config In Use", Detail: detail + "; remove it from their conditions first"}
}

func configWriteError(err error) error {
	if sqldb.IsUniqueViolation(err) {
		return &models.Error{Code: models.ECONFLICT, Field: "display_name", Detail: "a config of this family with this display name exists"}
	}
	return fmt.Errorf("write condition config: %w", err)
}
