package protection

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/uptrace/bun"

	"iam/models"
	"iam/models/criteria"
	"iam/models/sqldb"
)

// PolicyLimits bound conditional access policies.
var PolicyLimits = struct {
	MaxPolicies        int // non-default policies of an organization
	MaxNameLength      int // characters
	MaxDescription     int // characters
	MaxConditions      int // conditions of a policy
	MaxConditionConfig int // configs of one condition
	MaxAssigned        int // entries of each of user_ids, group_ids, device_ids, device group_ids, app_ids
	MaxFactors         int // factor configs of primary or secondary authentication
	MaxRadiusAttrs     int // RADIUS attributes of an NPS setting
	MaxRadiusValue     int // characters of a RADIUS attribute value
	MaxMFATimeout      int // seconds
	MaxTrustDays       int // the longest MFA trust, in days
	MaxCaptchaAttempts int
}{MaxPolicies: 1000, MaxNameLength: 100, MaxDescription: 1000, MaxConditions: 20, MaxConditionConfig: 50,
	MaxAssigned: 1000, MaxFactors: 10, MaxRadiusAttrs: 50, MaxRadiusValue: 253, MaxMFATimeout: 3600, MaxTrustDays: 90, MaxCaptchaAttempts: 100}

// DefaultPolicyName is the name of each organization's default policy; no
// other policy may take it.
const DefaultPolicyName = "Default Policy"

// defaultMFATimeout is the mfa_timeout of a setting that leaves it 0.
const defaultMFATimeout = 300

func isOneOf(v string, allowed ...string) bool { return slices.Contains(allowed, v) }

// policyRefs are the ids a policy names, to be checked against the database.
type policyRefs struct {
	configs      map[int64][]string // config id → fields naming it
	configFamily map[int64]ConfigFamily
	users        []int64
	groups       []int64
	devices      map[int64][]string
	deviceGroups map[int64][]string
	factors      map[int64][]string
	templates    map[int64][]string
	apps         map[string][]string
}

func addRef[K comparable](m map[K][]string, id K, field string) {
	if !slices.Contains(m[id], field) {
		m[id] = append(m[id], field)
	}
}

// checkPolicy checks p's shape and writes defaults into it (types of
// single-type endpoints, authn_mode native, mfa_timeout 300, captcha
// frequency always, selection modes primary, empty arrays). It returns the
// ids p names for checkPolicyRefs.
func checkPolicy(p *Policy, pr *models.Problems) *policyRefs {
	refs := &policyRefs{configs: map[int64][]string{}, configFamily: map[int64]ConfigFamily{}, devices: map[int64][]string{},
		deviceGroups: map[int64][]string{}, factors: map[int64][]string{}, templates: map[int64][]string{}, apps: map[string][]string{}}
	p.Name = strings.TrimSpace(p.Name)
	switch n := utf8.RuneCountInString(p.Name); {
	case n == 0:
		pr.Add("name", "is required")
	case n > PolicyLimits.MaxNameLength:
		pr.Add("name", "is longer than %d characters", PolicyLimits.MaxNameLength)
	case !p.IsDefault && strings.EqualFold(p.Name, DefaultPolicyName):
		pr.Add("name", "%q is the default policy's name", DefaultPolicyName)
	}
	if utf8.RuneCountInString(p.Description) > PolicyLimits.MaxDescription {
		pr.Add("description", "is longer than %d characters", PolicyLimits.MaxDescription)
	}
	if !isOneOf(p.AccessType, AccessAllow, AccessDeny) {
		pr.Add("access_type", "must be allow or deny")
	}
	if p.IsDefault {
		if !p.IsEnabled {
			pr.Add("is_enabled", "the default policy is always enabled")
		}
		if len(p.Conditions) > 0 || p.CriteriaExpression != "" {
			pr.Add("access_conditions", "the default policy has no conditions: it applies when no other policy does")
		}
		if len(p.UserIDs) > 0 || len(p.GroupIDs) > 0 {
			pr.Add("user_assignments", "the default policy applies to every user and takes no assignments")
		}
	}
	checkConditions(p, pr, refs)
	checkUsers(p, pr, refs)
	checkEndpoints(p, pr, refs)
	checkPolicyAdvanced(&p.AdvancedSettings, pr)
	return refs
}

func checkConditions(p *Policy, pr *models.Problems, refs *policyRefs) {
	const f = "access_conditions"
	if len(p.Conditions) > PolicyLimits.MaxConditions {
		pr.Add(f+".conditions", "holds more than %d conditions", PolicyLimits.MaxConditions)
		return
	}
	seqs := map[int]bool{}
	for i := range p.Conditions {
		c := &p.Conditions[i]
		cf := fmt.Sprintf("%s.conditions[%d]", f, i)
		switch {
		case c.SequenceNumber < 1 || c.SequenceNumber > criteria.MaxSequence:
			pr.Add(cf+".sequence_number", "must be 1 to %d", criteria.MaxSequence)
		case seqs[c.SequenceNumber]:
			pr.Add(cf+".sequence_number", "%d is used by another condition", c.SequenceNumber)
		}
		seqs[c.SequenceNumber] = true
		family, ok := ConditionFamilies[c.FactorType]
		if !ok {
			pr.Add(cf+".factor_type", "must be ipaddress, geolocation or time")
		}
		if !isOneOf(c.Comparator, ComparatorIn, ComparatorNotIn) {
			pr.Add(cf+".comparator", "must be in or not_in")
		}
		if c.IncludeAllTrustedSources && c.FactorType != FactorTypeIPAddress {
			pr.Add(cf+".include_all_trusted_sources", "applies to ipaddress conditions only")
		}
		if c.FactorConfigs == nil {
			c.FactorConfigs = []RefID{}
		}
		switch {
		case len(c.FactorConfigs) == 0 && !c.IncludeAllTrustedSources:
			pr.Add(cf+".factor_configs", "name at least one %s config", family)
		case len(c.FactorConfigs) > PolicyLimits.MaxConditionConfig:
			pr.Add(cf+".factor_configs", "holds more than %d configs", PolicyLimits.MaxConditionConfig)
		default:
			seen := map[RefID]bool{}
			for _, id := range c.FactorConfigs {
				if seen[id] {
					pr.AddOnce(cf+".factor_configs", "names config %d more than once", id)
					continue
				}
				seen[id] = true
				if ok {
					addRef(refs.configs, int64(id), cf+".factor_configs")
					refs.configFamily[int64(id)] = family
				}
			}
		}
	}
	slices.SortFunc(p.Conditions, func(a, b PolicyCondition) int { return a.SequenceNumber - b.SequenceNumber })
	p.CriteriaExpression = strings.TrimSpace(p.CriteriaExpression)
	ef := f + ".criteria_expression"
	if len(p.Conditions) == 0 {
		if p.CriteriaExpression != "" {
			pr.Add(ef, "must be empty when there are no conditions")
		}
		return
	}
	if p.CriteriaExpression == "" {
		pr.Add(ef, "is required: an expression over the conditions' sequence numbers such as \"1 and (2 or 3)\"")
		return
	}
	e, err := criteria.Parse(p.CriteriaExpression)
	if err != nil {
		pr.Add(ef, "%v", err)
		return
	}
	used := criteria.Refs(e)
	var unknown, unused []string
	for _, n := range used {
		if !seqs[n] {
			unknown = append(unknown, fmt.Sprint(n))
		}
	}
	for _, c := range p.Conditions {
		if !slices.Contains(used, c.SequenceNumber) {
			unused = append(unused, fmt.Sprint(c.SequenceNumber))
		}
	}
	switch {
	case len(unknown) > 0:
		pr.Add(ef, "names sequence number(s) %s that no condition has", strings.Join(unknown, ", "))
	case len(unused) > 0:
		pr.Add(ef, "does not use the condition(s) with sequence number(s) %s", strings.Join(unused, ", "))
	default:
		p.CriteriaExpression = e.String()
	}
}

func checkUsers(p *Policy, pr *models.Problems, refs *policyRefs) {
	uniq := func(field string, ids []int64) []int64 {
		if len(ids) > PolicyLimits.MaxAssigned {
			pr.Add(field, "holds more than %d ids", PolicyLimits.MaxAssigned)
			return nil
		}
		out := slices.Clone(ids)
		slices.Sort(out)
		return slices.Compact(out)
	}
	p.UserIDs = uniq("user_assignments.user_ids", p.UserIDs)
	p.GroupIDs = uniq("user_assignments.group_ids", p.GroupIDs)
	if p.UserIDs == nil {
		p.UserIDs = []int64{}
	}
	if p.GroupIDs == nil {
		p.GroupIDs = []int64{}
	}
	refs.users, refs.groups = p.UserIDs, p.GroupIDs
}

func checkEndpoints(p *Policy, pr *models.Problems, refs *policyRefs) {
	const f = "endpoints_settings"
	if len(p.EndpointsSettings) == 0 {
		pr.Add(f, "name at least one endpoint: %s", strings.Join(Endpoints, ", "))
		return
	}
	seen := map[string]bool{}
	for i := range p.EndpointsSettings {
		s := &p.EndpointsSettings[i]
		sf := fmt.Sprintf("%s[%d]", f, i)
		types, ok := EndpointTypes[s.Endpoint]
		switch {
		case !ok:
			pr.Add(sf+".endpoint", "must be one of %s", strings.Join(Endpoints, ", "))
			continue
		case seen[s.Endpoint]:
			pr.Add(sf+".endpoint", "%s has another entry: one entry per endpoint", s.Endpoint)
			continue
		}
		seen[s.Endpoint] = true
		if s.Type == "" {
			s.Type = types[0]
		}
		if !slices.Contains(types, s.Type) {
			pr.Add(sf+".type", "must be %s for %s", strings.Join(types, " or "), s.Endpoint)
			continue
		}
		checkActions(s, sf, pr)
		checkAssignments(s, sf, pr, refs)
		checkPrimary(&s.PrimaryAuthentication, sf+".primary_authentication", pr, refs)
		checkSecondary(&s.SecondaryAuthentication, sf+".secondary_authentication", pr, refs)
		checkEndpointAdvanced(s, sf+".advanced_settings", pr, refs)
	}
	order := map[string]int{}
	for i, e := range Endpoints {
		order[e] = i
	}
	if pr.None() {
		slices.SortStableFunc(p.EndpointsSettings, func(a, b EndpointSetting) int { return order[a.Endpoint] - order[b.Endpoint] })
	}
}

func checkActions(s *EndpointSetting, sf string, pr *models.Problems) {
	allowed := EndpointActions[s.Type]
	if s.Actions == nil {
		s.Actions = []string{}
	}
	if len(allowed) == 0 {
		if len(s.Actions) > 0 {
			pr.Add(sf+".actions", "must be empty for %s: its only action is signing in", s.Type)
		}
		return
	}
	if len(s.Actions) == 0 {
		pr.Add(sf+".actions", "name at least one of %s", strings.Join(allowed, ", "))
		return
	}
	var out []string
	for _, a := range s.Actions {
		if !slices.Contains(allowed, a) {
			pr.Add(sf+".actions", "%q is not an action of %s: use %s", a, s.Type, strings.Join(allowed, ", "))
			return
		}
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	s.Actions = out
}

func checkAssignments(s *EndpointSetting, sf string, pr *models.Problems, refs *policyRefs) {
	if d := s.DeviceAssignment; d != nil {
		if s.Endpoint != EndpointComputerDevices {
			pr.Add(sf+".device_assignment", "applies to ComputerDevices only")
		} else {
			for _, part := range []struct {
				name string
				ids  []RefID
				into map[int64][]string
			}{{"device_ids", d.DeviceIDs, refs.devices}, {"group_ids", d.GroupIDs, refs.deviceGroups}} {
				if len(part.ids) > PolicyLimits.MaxAssigned {
					pr.Add(sf+".device_assignment."+part.name, "holds more than %d ids", PolicyLimits.MaxAssigned)
					continue
				}
				for _, id := range part.ids {
					addRef(part.into, int64(id), sf+".device_assignment."+part.name)
				}
			}
			d.DeviceIDs, d.GroupIDs = uniqRefs(d.DeviceIDs), uniqRefs(d.GroupIDs)
		}
	}
	if s.Endpoint == EndpointComputerDevices {
		if d := s.DeviceAssignment; d == nil || (!d.AllDevicesGroupSelected && len(d.DeviceIDs) == 0 && len(d.GroupIDs) == 0) {
			pr.Add(sf+".device_assignment", "name devices, device groups or all_devices_group_selected: the devices the policy protects")
		}
	}
	if a := s.AppAssignment; a != nil {
		switch {
		case s.Endpoint != EndpointSSOApplications:
			pr.Add(sf+".app_assignment", "applies to SSOApplications only")
		case len(a.AppIDs) > PolicyLimits.MaxAssigned:
			pr.Add(sf+".app_assignment.app_ids", "holds more than %d ids", PolicyLimits.MaxAssigned)
		default:
			slices.Sort(a.AppIDs)
			a.AppIDs = slices.Compact(a.AppIDs)
			if a.AppIDs == nil {
				a.AppIDs = []string{}
			}
			for _, id := range a.AppIDs {
				addRef(refs.apps, id, sf+".app_assignment.app_ids")
			}
		}
	}
}

func uniqRefs(ids []RefID) []RefID {
	out := slices.Clone(ids)
	slices.Sort(out)
	out = slices.Compact(out)
	if out == nil {
		out = []RefID{}
	}
	return out
}

// checkOrders checks verification orders are 1..n, each once.
func checkOrders(field string, orders []int, pr *models.Problems) {
	sorted := slices.Clone(orders)
	slices.Sort(sorted)
	for i, o := range sorted {
		if o != i+1 {
			pr.AddOnce(field, "verification_order must number the %d factor configs 1 to %d, each once", len(orders), len(orders))
			return
		}
	}
}

func checkPrimary(a *PrimaryAuthentication, f string, pr *models.Problems, refs *policyRefs) {
	if a.FactorConfigs == nil {
		a.FactorConfigs = []PrimaryFactor{}
	}
	if len(a.FactorConfigs) > PolicyLimits.MaxFactors {
		pr.Add(f+".factor_configs", "holds more than %d factor configs", PolicyLimits.MaxFactors)
		return
	}
	if a.IsPasswordlessEnabled && len(a.FactorConfigs) == 0 {
		pr.Add(f+".factor_configs", "passwordless sign-in needs at least one factor config")
		return
	}
	var orders []int
	seen := map[RefID]bool{}
	for _, fc := range a.FactorConfigs {
		if seen[fc.AuthnFactorConfigID] {
			pr.AddOnce(f+".factor_configs", "names factor config %d more than once", fc.AuthnFactorConfigID)
		}
		seen[fc.AuthnFactorConfigID] = true
		orders = append(orders, fc.VerificationOrder)
		addRef(refs.factors, int64(fc.AuthnFactorConfigID), f+".factor_configs")
	}
	checkOrders(f+".factor_configs", orders, pr)
	slices.SortFunc(a.FactorConfigs, func(x, y PrimaryFactor) int { return x.VerificationOrder - y.VerificationOrder })
}

func checkSecondary(a *SecondaryAuthentication, f string, pr *models.Problems, refs *policyRefs) {
	if a.FactorConfigs == nil {
		a.FactorConfigs = []SecondaryFactor{}
	}
	if a.AuthnMode == "" {
		a.AuthnMode = "native"
	}
	if !isOneOf(a.AuthnMode, "native", "secure_link") {
		pr.Add(f+".authn_mode", "must be native or secure_link")
	}
	if len(a.FactorConfigs) > PolicyLimits.MaxFactors {
		pr.Add(f+".factor_configs", "holds more than %d factor configs", PolicyLimits.MaxFactors)
		return
	}
	var orders []int
	mandatory := 0
	seen := map[RefID]bool{}
	for _, fc := range a.FactorConfigs {
		if seen[fc.AuthnFactorConfigID] {
			pr.AddOnce(f+".factor_configs", "names factor config %d more than once", fc.AuthnFactorConfigID)
		}
		seen[fc.AuthnFactorConfigID] = true
		orders = append(orders, fc.VerificationOrder)
		if fc.IsMandatory {
			mandatory++
		}
		addRef(refs.factors, int64(fc.AuthnFactorConfigID), f+".factor_configs")
	}
	checkOrders(f+".factor_configs", orders, pr)
	slices.SortFunc(a.FactorConfigs, func(x, y SecondaryFactor) int { return x.VerificationOrder - y.VerificationOrder })
	if !a.IsMFAEnabled {
		if a.NoOfRequiredFactors < 0 {
			pr.Add(f+".no_of_required_factors", "must not be negative")
		}
		return
	}
	switch {
	case len(a.FactorConfigs) == 0:
		pr.AddOnce(f+".factor_configs", "MFA needs at least one factor config")
	case a.NoOfRequiredFactors < 1 || a.NoOfRequiredFactors > len(a.FactorConfigs):
		pr.Add(f+".no_of_required_factors", "must be 1 to %d (the factor configs given)", len(a.FactorConfigs))
	case mandatory > a.NoOfRequiredFactors:
		pr.Add(f+".no_of_required_factors", "is %d but %d factor configs are mandatory", a.NoOfRequiredFactors, mandatory)
	}
}

func checkEndpointAdvanced(s *EndpointSetting, f string, pr *models.Problems, refs *policyRefs) {
	a := &s.AdvancedSettings
	a.NotificationTemplate = nil
	if a.MFATimeout == 0 {
		a.MFATimeout = defaultMFATimeout
	}
	if a.MFATimeout < 30 || a.MFATimeout > PolicyLimits.MaxMFATimeout {
		pr.Add(f+".mfa_timeout", "must be 30 to %d seconds", PolicyLimits.MaxMFATimeout)
	}
	if a.MFAUnenrolledAction == "" {
		a.MFAUnenrolledAction = AccessDeny
	}
	if !isOneOf(a.MFAUnenrolledAction, AccessAllow, AccessDeny) {
		pr.Add(f+".mfa_unenrolled_action", "must be allow or deny")
	}
	t := &a.MFATrust
	if t.InitiatorType == "" {
		t.InitiatorType = "user"
	}
	if !isOneOf(t.InitiatorType, "user", "admin") {
		pr.Add(f+".mfa_trust.initiator_type", "must be user or admin")
	}
	if t.IsEnabled || t.Duration != (TrustDuration{}) {
		days := map[string]int{"minutes": 24 * 60, "hours": 24, "days": 1}
		per, ok := days[t.Duration.Unit]
		switch {
		case !ok:
			pr.Add(f+".mfa_trust.duration.unit", "must be minutes, hours or days")
		case t.Duration.Value < 1 || t.Duration.Value > PolicyLimits.MaxTrustDays*per:
			pr.Add(f+".mfa_trust.duration.value", "must be 1 to %d %s (%d days at most)", PolicyLimits.MaxTrustDays*per, t.Duration.Unit, PolicyLimits.MaxTrustDays)
		}
	}
	if r := a.RadiusResponseConfig; r != nil {
		rf := f + ".radius_response_config"
		if s.Endpoint != EndpointNPS {
			pr.Add(rf, "applies to NPS only")
		} else {
			checkRadius(r, rf, pr)
		}
	}
	if id := a.NotificationTemplateID; id != nil {
		addRef(refs.templates, int64(*id), f+".notification_template_id")
	}
}

func checkRadius(r *RadiusResponseConfig, rf string, pr *models.Problems) {
	if r.VendorID != "" && (len(r.VendorID) > 10 || strings.Trim(r.VendorID, "0123456789") != "") {
		pr.Add(rf+".vendor_id", "must be a RADIUS vendor id: digits (an SMI network management private enterprise code)")
	}
	if r.AttributesList == nil {
		r.AttributesList = []RadiusAttribute{}
	}
	if len(r.AttributesList) > PolicyLimits.MaxRadiusAttrs {
		pr.Add(rf+".attributes_list", "holds more than %d attributes", PolicyLimits.MaxRadiusAttrs)
		return
	}
	for i, at := range r.AttributesList {
		af := fmt.Sprintf("%s.attributes_list[%d]", rf, i)
		if !isOneOf(at.Type, "vendor", "standard") {
			pr.Add(af+".type", "must be vendor or standard")
		} else if at.Type == "vendor" && r.VendorID == "" {
			pr.AddOnce(rf+".vendor_id", "is required by vendor attributes")
		}
		if at.Number < 1 || at.Number > 255 {
			pr.Add(af+".number", "must be 1 to 255")
		}
		if msg := radiusValueProblem(at.DataType, at.Value); msg != "" {
			pr.Add(af+".value", "%s", msg)
		}
	}
}

func radiusValueProblem(dataType, v string) string {
	if utf8.RuneCountInString(v) > PolicyLimits.MaxRadiusValue {
		return fmt.Sprintf("is longer than %d characters", PolicyLimits.MaxRadiusValue)
	}
	switch dataType {
	case "string":
	case "integer", "enum":
		var n uint64
		if _, err := fmt.Sscanf(v, "%d", &n); err != nil || fmt.Sprint(n) != v || n > 1<<32-1 {
			return "must be an unsigned 32-bit integer for data_type " + dataType
		}
	case "ipv4address", "ipv6address":
		pre, err := parseAddrOrPrefix(v)
		if err != nil || !pre.IsSingleIP() || pre.Addr().Is4() != (dataType == "ipv4address") {
			return "must be an address of data_type " + dataType
		}
	default:
		return "data_type must be string, integer, enum, ipv4address or ipv6address"
	}
	return ""
}

func checkPolicyAdvanced(a *PolicyAdvancedSettings, pr *models.Problems) {
	const f = "advanced_settings"
	if a.CaptchaFrequencyType == "" {
		a.CaptchaFrequencyType = "always"
	}
	switch a.CaptchaFrequencyType {
	case "always":
	case "after_failed_attempts":
		if a.CaptchaFailedAttemptsThreshold < 1 || a.CaptchaFailedAttemptsThreshold > PolicyLimits.MaxCaptchaAttempts {
			pr.Add(f+".captcha_failed_attempts_threshold", "must be 1 to %d with after_failed_attempts", PolicyLimits.MaxCaptchaAttempts)
		}
	default:
		pr.Add(f+".captcha_frequency_type", "must be always or after_failed_attempts")
	}
	for _, m := range []struct {
		name string
		v    *string
	}{{"emailaddress_selection_mode", &a.EmailaddressSelectionMode}, {"mobileno_selection_mode", &a.MobilenoSelectionMode}} {
		if *m.v == "" {
			*m.v = "primary"
		}
		if !isOneOf(*m.v, "primary", "select", "input") {
			pr.Add(f+"."+m.name, "must be primary, select or input")
		}
	}
}

// checkPolicyRefs checks, in tx, that every id refs holds names a row of
// p's organization of the right kind.
func checkPolicyRefs(ctx context.Context, tx bun.IDB, orgID int64, refs *policyRefs, pr *models.Problems) error {
	// Condition configs: exist, in the family of their condition.
	if len(refs.configs) > 0 {
		var rows []struct {
			ID     int64        `bun:"id"`
			Family ConfigFamily `bun:"family"`
		}
		// KEY SHARE: a concurrent bulk delete of these configs waits for
		// this transaction, then sees the policy using them (409).
		q := tx.NewSelect().Table("ca_condition_configs").Column("id", "family").
			Where("org_id = ? AND id IN (?)", orgID, bun.List(mapKeys(refs.configs)))
		err := sqldb.DialectOf(tx).LockRows(q, "KEY SHARE").Scan(ctx, &rows)
		if err != nil {
			return fmt.Errorf("select condition configs: %w", err)
		}
		have := map[int64]ConfigFamily{}
		for _, r := range rows {
			have[r.ID] = r.Family
		}
		for _, id := range sortedKeys(refs.configs) {
			fam, ok := have[id]
			for _, field := range refs.configs[id] {
				switch {
				case !ok:
					pr.AddOnce(field, "no conditional factor config with id %d", id)
				case fam != refs.configFamily[id]:
					pr.AddOnce(field, "config %d is a %s config; this condition takes %s configs", id, fam, refs.configFamily[id])
				}
			}
		}
	}
	missing := func(table, extra string, ids []int64) ([]int64, error) {
		if len(ids) == 0 {
			return nil, nil
		}
		var found []int64
		q := tx.NewSelect().Table(table).Column("id").Where("org_id = ? AND id IN (?)", orgID, bun.List(ids))
		if extra != "" {
			q = q.Where(extra)
		}
		if err := q.Scan(ctx, &found); err != nil {
			return nil, fmt.Errorf("select %s: %w", table, err)
		}
		var out []int64
		for _, id := range ids {
			if !slices.Contains(found, id) {
				out = append(out, id)
			}
		}
		return out, nil
	}
	list := func(ids []int64) string {
		s := make([]string, len(ids))
		for i, id := range ids {
			s[i] = models.FormatID(id)
		}
		return firstFew(s)
	}
	for _, c := range []struct {
		table, extra, field, what string
		ids                       []int64
	}{
		{"users", "", "user_assignments.user_ids", "user", refs.users},
		{"groups", "", "user_assignments.group_ids", "group", refs.groups},
	} {
		gone, err := missing(c.table, c.extra, c.ids)
		if err != nil {
			return err
		}
		if len(gone) > 0 {
			pr.AddOnce(c.field, "no %s with id %s", c.what, list(gone))
		}
	}
	for _, c := range []struct {
		table, extra, what string
		refs               map[int64][]string
	}{
		{"devices", "deleted_at IS NULL", "device", refs.devices},
		{"authn_factor_configs", "", "factor config", refs.factors},
		{"notification_templates", "", "notification template", refs.templates},
	} {
		gone, err := missing(c.table, c.extra, sortedKeys(c.refs))
		if err != nil {
			return err
		}
		byField := map[string][]int64{}
		var fields []string
		for _, id := range gone {
			for _, f := range c.refs[id] {
				if byField[f] == nil {
					fields = append(fields, f)
				}
				byField[f] = append(byField[f], id)
			}
		}
		for _, f := range fields {
			pr.AddOnce(f, "no %s with id %s", c.what, list(byField[f]))
		}
	}
	if err := checkDeviceGroupRefs(ctx, tx, orgID, refs, pr); err != nil {
		return err
	}
	if len(refs.apps) > 0 {
		var found []string
		err := tx.NewSelect().Table("oauth_clients").Column("id").Where("org_id = ? AND id IN (?)", orgID, bun.List(mapKeys(refs.apps))).Scan(ctx, &found)
		if err != nil {
			return fmt.Errorf("select oauth clients: %w", err)
		}
		for _, id := range sortedKeys(refs.apps) {
			if !slices.Contains(found, id) {
				for _, f := range refs.apps[id] {
					pr.AddOnce(f, "no application (OAuth client) with id %q", id)
				}
			}
		}
	}
	return nil
}

// checkDeviceGroupRefs checks that the device group ids name device groups
// of the organization.
func checkDeviceGroupRefs(ctx context.Context, tx bun.IDB, orgID int64, refs *policyRefs, pr *models.Problems) error {
	ids := sortedKeys(refs.deviceGroups)
	if len(ids) == 0 {
		return nil
	}
	var found []int64
	if err := tx.NewSelect().Table("device_groups").Column("id").Where("org_id = ? AND id IN (?)", orgID, bun.List(ids)).Scan(ctx, &found); err != nil {
		return fmt.Errorf("select device groups: %w", err)
	}
	byField := map[string][]string{}
	var fields []string
	for _, id := range ids {
		if slices.Contains(found, id) {
			continue
		}
		for _, f := range refs.deviceGroups[id] {
			if byField[f] == nil {
				fields = append(fields, f)
			}
			byField[f] = append(byField[f], models.FormatID(id))
		}
	}
	for _, f := range fields {
		pr.AddOnce(f, "no device group with id %s", firstFew(byField[f]))
	}
	return nil
}

func mapKeys[K comparable, V any](m map[K]V) []K {
	out := make([]K, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func sortedKeys[K interface{ ~int64 | ~string }, V any](m map[K]V) []K {
	out := mapKeys(m)
	slices.Sort(out)
	return out
}
