package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"
)

// A request can be valid against the document and still name state that
// is not there: an id no resource has, a cursor no page gave, an order that
// leaves out a policy. Those are not the document's rules but the stored
// state's, so positive cases take them from the state, as a stateful tester
// would: ids from the seeded resources of their kind (seeded.hint, by the
// field's name), no cursor (build leaves it out), and for the operations
// whose validity depends on what is stored, the hook below. Negative cases
// are made from positive ones and break one rule of the document.

// opKinds are the kinds of ids some operations take where idKinds says
// otherwise.
var opKinds = map[string]map[string]string{
	// A smart-card upload enrolls smart cards only.
	"POST /api/v1/protection/quick-enrollment/upload-smartcards": {"factor_configs": "smart_card_factor"},
}

// conditionFamilies is the condition-config family of each policy
// condition factor_type.
var conditionFamilies = map[string]string{"ipaddress": "ipsources", "geolocation": "geolocations", "time": "businesshours"}

// stateful makes tc, a request valid against the document, valid against
// the stored state too.
func (c *caseGen) stateful(tc *testCase) error {
	s := c.seed
	first := func(kind string) string {
		if vs := s.values[kind]; len(vs) > 0 {
			return fmt.Sprint(vs[0])
		}
		return ""
	}
	// A condition config is named under its own family.
	if family, ok := tc.path["family"]; ok {
		if _, ok := tc.path["config_id"]; ok {
			if id := first("config:" + family); id != "" {
				tc.path["config_id"] = id
			}
		}
	}
	switch tc.op.String() {
	case "POST /api/v1/protection/conditionalfactor-configs/{family}", "PATCH /api/v1/protection/conditionalfactor-configs/{family}/{config_id}":
		// The body is of one family's schema (ConditionConfigCreate's
		// oneOf); the path names that family. Ranges run from low to high.
		body := tc.jsonBody()
		for k, family := range map[string]string{"business_hours_bitmap": "businesshours", "timezone": "businesshours",
			"countries": "geolocations", "is_unknown_ip_locations_included": "geolocations",
			"is_trusted_source": "ipsources", "ip_addresses": "ipsources", "ip_address_ranges": "ipsources"} {
			if _, ok := body[k]; ok {
				tc.path["family"] = family
			}
		}
		if id := first("config:" + tc.path["family"]); id != "" && tc.path["config_id"] != "" {
			tc.path["config_id"] = id
		}
		// A patch naming countries or addresses keeps one (the rest of
		// the stored config may have none).
		return tc.editBody(func(body map[string]any) {
			if cs, ok := body["countries"].([]any); ok && len(cs) == 0 && body["is_unknown_ip_locations_included"] != true {
				body["is_unknown_ip_locations_included"] = true
			} else if v, ok := body["is_unknown_ip_locations_included"]; ok && v != true && body["countries"] == nil {
				body["countries"] = []any{"FR"}
			}
			_, hasAddrs := body["ip_addresses"]
			_, hasRanges := body["ip_address_ranges"]
			if addrs, _ := body["ip_addresses"].(string); (hasAddrs || hasRanges) && strings.TrimSpace(addrs) == "" {
				if rs, _ := body["ip_address_ranges"].([]any); len(rs) == 0 {
					body["ip_addresses"] = "192.0.2.0/24"
				}
			}
			ranges, _ := body["ip_address_ranges"].([]any)
			for _, r := range ranges {
				if r, ok := r.(map[string]any); ok {
					orderRange(r)
				}
			}
		})
	case "PATCH /api/v1/device-account-linking":
		// attribute_value follows attribute_type, the stored one when the
		// patch has none: the patch gives both.
		return tc.editBody(func(body map[string]any) {
			_, hasType := body["attribute_type"]
			_, hasValue := body["attribute_value"]
			switch {
			case hasValue && !hasType:
				body["attribute_type"] = "naming_format"
				if v, _ := body["attribute_value"].(string); !strings.Contains(v, "%") {
					body["attribute_type"] = "attribute"
				}
			case hasType && !hasValue:
				body["attribute_value"] = map[any]string{"attribute": "email", "naming_format": "%first_name%.%last_name%"}[body["attribute_type"]]
			}
		})
	case "POST /api/v1/templates/notification", "PATCH /api/v1/templates/notification/{template_id}":
		return tc.editBody(func(body map[string]any) { templateFiles(body, tc.op.method == "PATCH") })
	case "PATCH /api/v1/protection/quick-enrollment/notification-auto-schedule/{schedule_id}":
		// A new interval comes with its day (the stored one is dropped
		// with the interval it belonged to); days come with their interval.
		return tc.editBody(func(body map[string]any) {
			set, ok := body["schedule_settings"].(map[string]any)
			if !ok {
				return
			}
			if set["scheduler_interval"] == nil {
				set["scheduler_interval"] = "DAILY" // the days given are then unread
			}
			switch strings.ToUpper(strings.TrimSpace(fmt.Sprint(set["scheduler_interval"]))) {
			case "WEEKLY":
				if set["day_of_week"] == nil {
					set["day_of_week"] = "1"
				}
			case "MONTHLY":
				if set["day_of_month"] == nil {
					set["day_of_month"] = "1"
				}
			}
		})
	case "PATCH /api/v1/protection/admin-settings":
		return tc.editBody(func(body map[string]any) { c.offlineMFA(body) })
	case "POST /api/v1/management/actions/{action_id}/execute":
		return c.execute(tc)
	case "PUT /api/v1/protection/conditional-access-policies/priority":
		// Every policy but the default, each once.
		ids, err := s.policyOrder()
		if err != nil {
			return err
		}
		c.g.r.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
		return tc.editBody(func(body map[string]any) { body["ids"] = ids })
	case "PATCH /api/v1/groups/{group_id}":
		// Only a dynamic group has a membership rule.
		if body := tc.jsonBody(); body != nil && body["membership_rule"] != nil {
			tc.path["group_id"] = first("dynamic_group")
		}
	case "POST /api/v1/protection/conditional-access-policies", "PATCH /api/v1/protection/conditional-access-policies/{policy_id}":
		return tc.editBody(func(body map[string]any) { c.policy(body) })
	case "GET /api/v1/protection/agents-info/{agent_type}/download":
		// The device agent's package is per platform.
		if tc.path["agent_type"] == "DeviceAgent" && !tc.hasQuery("platform") {
			tc.query = append(tc.query, [2]string{"platform", "windows"})
		}
	case "DELETE /api/v1/management/actions/{action_id}/uploads/{upload_id}/data":
		// Rows are removed by ids, a filter or both: never all by default.
		if !tc.hasQuery("ids") && !tc.hasQuery("filter") {
			tc.query = append(tc.query, [2]string{"ids", "1"})
		}
	}
	return nil
}

// policyOrder lists the ids of every policy but the default (without a
// server, in the generator's tests, the seeded ones).
func (s *seeded) policyOrder() ([]any, error) {
	if s.base == "" {
		return append([]any{}, s.values["policy"]...), nil
	}
	_, out, err := s.call("GET", "/api/v1/protection/conditional-access-policies?limit=1000", nil, "")
	if err != nil {
		return nil, err
	}
	ids := []any{}
	list, _ := out["data"].([]any)
	for _, p := range list {
		if p, ok := p.(map[string]any); ok && p["is_default_policy"] != true {
			ids = append(ids, id(map[string]any{"data": p}))
		}
	}
	return ids, nil
}

func (tc *testCase) hasQuery(name string) bool {
	for _, kv := range tc.query {
		if kv[0] == name {
			return true
		}
	}
	return false
}

// jsonBody is tc's JSON object body, or nil.
func (tc *testCase) jsonBody() map[string]any {
	if tc.ctype != "application/json" && tc.ctype != "application/merge-patch+json" {
		return nil
	}
	d := json.NewDecoder(bytes.NewReader(tc.body))
	d.UseNumber() // ids beyond 2^53 kept as written
	var body map[string]any
	if d.Decode(&body) != nil {
		return nil
	}
	return body
}

// editBody changes tc's JSON object body with fn.
func (tc *testCase) editBody(fn func(map[string]any)) error {
	body := tc.jsonBody()
	if body == nil {
		return nil
	}
	fn(body)
	b, err := json.Marshal(body)
	tc.body = b
	return err
}

// orderRange makes an IPRange's from and to one family, from not after to.
func orderRange(r map[string]any) {
	from, err1 := netip.ParseAddr(fmt.Sprint(r["from"]))
	to, err2 := netip.ParseAddr(fmt.Sprint(r["to"]))
	if err1 != nil || err2 != nil {
		return
	}
	if from.Unmap().Is4() != to.Unmap().Is4() {
		to = from
	}
	if from.Unmap().Compare(to.Unmap()) > 0 {
		from, to = to, from
	}
	r["from"], r["to"] = from.String(), to.String()
}

// offlineMFA makes an admin-settings patch valid over any stored settings:
// the offline MFA factor configs are stored ones, numbered 1 to n, with a
// required count between the mandatory ones and all; enabling names some;
// a duration's value and unit go together.
func (c *caseGen) offlineMFA(body map[string]any) {
	mfa, ok := body["offline_mfa_settings"].(map[string]any)
	if !ok {
		return
	}
	sec, hasSec := mfa["secondary_authentication"].(map[string]any)
	if factors := c.seed.values["factor"]; len(factors) > 0 && (hasSec || mfa["is_enabled"] == true) {
		if sec == nil {
			sec = map[string]any{}
			mfa["secondary_authentication"] = sec
		}
		n := 1 + c.g.r.Intn(len(factors))
		var list []any
		mandatory := 0
		for i, k := range c.g.r.Perm(len(factors))[:n] {
			m := c.g.chance(0.3)
			if m {
				mandatory++
			}
			list = append(list, map[string]any{"authn_factor_config_id": json.Number(fmt.Sprint(factors[k])), "verification_order": i + 1, "is_mandatory": m})
		}
		sec["factor_configs"] = list
		sec["no_of_required_factors"] = max(1, mandatory) + c.g.r.Intn(n-max(1, mandatory)+1)
	}
	if d, ok := mfa["offline_verification_duration"].(map[string]any); ok {
		if _, ok := d["unit"]; !ok {
			d["unit"] = "hours"
		}
		if _, ok := d["value"]; !ok {
			d["value"] = 1
		}
	}
}

// execute makes an execution's selection name users that are there:
// move-users the seeded user (by id, filter or the seeded upload) into a
// valid container; delete-users a user made for it (an upload of
// move-users is not delete-users'), without a container. The body names
// the users, so the query's filter is left out.
func (c *caseGen) execute(tc *testCase) error {
	var q [][2]string
	for _, kv := range tc.query {
		if kv[0] != "filter" {
			q = append(q, kv)
		}
	}
	tc.query = q
	email, userID := "seeded.user@example.com", fmt.Sprint(c.seed.values["user"][0])
	if tc.path["action_id"] == "delete-users" {
		var err error
		if email, userID, err = c.seed.doomedUser(); err != nil {
			return err
		}
	}
	return tc.editBody(func(body map[string]any) {
		switch {
		case body["user_ids"] != nil:
			body["user_ids"] = []any{userID}
		case body["filter"] != nil:
			body["filter"] = `email eq "` + email + `"`
		case body["upload_id"] != nil && tc.path["action_id"] == "delete-users":
			delete(body, "upload_id")
			body["user_ids"] = []any{userID}
		case body["upload_id"] == nil:
			body["user_ids"] = []any{userID}
		}
		if tc.path["action_id"] == "delete-users" {
			delete(body, "target_container")
		} else if _, ok := body["target_container"]; !ok {
			body["target_container"] = "OU=Moved,DC=example,DC=com"
		}
	})
}

// templateFiles keeps a template's files within the five it may have, the
// stored ones counted: a patch that adds files names the whole list (the
// stored files it does not name go), and names no stored file by id (which
// files a template holds changes as the cases run).
func templateFiles(body map[string]any, patch bool) {
	if patch {
		// A patch's sms merges into the stored one, which may have no
		// content.
		if sms, ok := body["sms"].(map[string]any); ok && sms["content"] == nil {
			sms["content"] = "Hello %first_name%"
		}
	}
	mail, ok := body["mail"].(map[string]any)
	if !ok {
		return
	}
	if patch {
		delete(mail, "attachment_ids")
		var added []any
		atts, _ := mail["attachments"].([]any)
		for _, a := range atts {
			if a, ok := a.(map[string]any); ok && a["file"] != nil {
				added = append(added, a)
			}
		}
		if _, ok := mail["attachments"]; ok || mail["inline_image_files"] != nil || mail["inline_images"] != nil {
			mail["attachments"], mail["inline_images"] = added, []any{}
			if added == nil {
				mail["attachments"] = []any{}
			}
		}
	}
	atts, _ := mail["attachments"].([]any)
	imgs, _ := mail["inline_image_files"].([]any)
	if len(atts)+len(imgs) > 5 {
		atts = atts[:min(len(atts), 3)]
		imgs = imgs[:min(len(imgs), 5-len(atts))]
		mail["attachments"], mail["inline_image_files"] = atts, imgs
	}
}

// policy keeps a policy body within the rules that relate its values to
// each other or to the stored state: a condition names configs of its
// factor type's family, sequence numbers are unique and the criteria
// expression uses each; one setting per endpoint, endpoints listing them;
// factor configs stored ones, each once, numbered 1 to n, the required
// count within bounds; vendor attributes with a vendor id; app ids left
// out (no application is seeded); not the default policy's name. A patch
// that touches conditions or settings gives them whole (the stored ones
// merge otherwise).
func (c *caseGen) policy(body map[string]any) {
	if name, ok := body["name"].(string); ok && strings.EqualFold(strings.TrimSpace(name), "Default Policy") {
		body["name"] = "Policy"
	}
	if ac, ok := body["access_conditions"].(map[string]any); ok {
		conds, _ := ac["conditions"].([]any)
		var seqs []string
		for i, cond := range conds {
			cond, _ := cond.(map[string]any)
			cond["sequence_number"] = i + 1
			seqs = append(seqs, fmt.Sprint(i+1))
			if vs := c.seed.values["config:"+conditionFamilies[fmt.Sprint(cond["factor_type"])]]; len(vs) > 0 && cond["include_all_trusted_sources"] != true {
				cond["factor_configs"] = []any{vs[0]}
			}
		}
		ac["conditions"] = append([]any{}, conds...)
		ac["criteria_expression"] = strings.Join(seqs, " and ")
	}
	if adv, ok := body["advanced_settings"].(map[string]any); ok {
		// Merged into the stored settings: the captcha frequency and its
		// threshold go together.
		switch adv["captcha_frequency_type"] {
		case nil:
			adv["captcha_frequency_type"] = "always"
		case "after_failed_attempts":
			if adv["captcha_failed_attempts_threshold"] == nil {
				adv["captcha_failed_attempts_threshold"] = 3
			}
		}
	}
	settings, ok := body["endpoints_settings"].([]any)
	if !ok {
		delete(body, "endpoints")
		return
	}
	seen := map[any]bool{}
	var kept, endpoints []any
	for _, st := range settings {
		st, _ := st.(map[string]any)
		if seen[st["endpoint"]] {
			continue
		}
		seen[st["endpoint"]] = true
		kept, endpoints = append(kept, st), append(endpoints, st["endpoint"])
		if prim, ok := st["primary_authentication"].(map[string]any); ok {
			c.factorList(prim, false)
		}
		if sec, ok := st["secondary_authentication"].(map[string]any); ok {
			mandatory, n := c.factorList(sec, true)
			if sec["is_mfa_enabled"] == true && n > 0 {
				lo := max(1, mandatory)
				sec["no_of_required_factors"] = lo + c.g.r.Intn(n-lo+1)
			}
		}
		if apps, ok := st["app_assignment"].(map[string]any); ok {
			apps["app_ids"] = []any{}
		}
		if adv, ok := st["advanced_settings"].(map[string]any); ok {
			if r, ok := adv["radius_response_config"].(map[string]any); ok {
				if v, _ := r["vendor_id"].(string); v == "" {
					r["vendor_id"] = "311"
				}
			}
		}
	}
	body["endpoints_settings"], body["endpoints"] = kept, endpoints
}

// factorList makes an authentication's factor_configs stored factor
// configs, each once, numbered 1 to n; it returns how many are mandatory
// and n.
func (c *caseGen) factorList(auth map[string]any, secondary bool) (mandatory, n int) {
	list, ok := auth["factor_configs"].([]any)
	if !ok {
		return 0, 0
	}
	factors := c.seed.values["factor"]
	list = list[:min(len(list), len(factors))]
	for i, f := range list {
		f, _ := f.(map[string]any)
		f["authn_factor_config_id"] = fmt.Sprint(factors[i])
		f["verification_order"] = i + 1
		if secondary && f["is_mandatory"] == true {
			mandatory++
		}
	}
	auth["factor_configs"] = append([]any{}, list...)
	if len(list) == 0 && auth["is_passwordless_enabled"] == true {
		auth["is_passwordless_enabled"] = false
	}
	return mandatory, len(list)
}
