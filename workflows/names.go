package workflows

import (
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
)

// TaskQueue is the task queue of every job workflow and its activities.
const TaskQueue = "iam-jobs"

// ProgressQuery is the query that returns a running job's JobProgress.
const ProgressQuery = "progress"

// Search attributes set on every job workflow, so that operators can filter
// runs in the Temporal UI (for example IamJobModule = "Identity"). They carry
// ids and counts only, never personal data.
var (
	AttrJobID     = temporal.NewSearchAttributeKeyKeyword("IamJobId")
	AttrOrgID     = temporal.NewSearchAttributeKeyKeyword("IamOrgId")
	AttrModule    = temporal.NewSearchAttributeKeyKeyword("IamJobModule")
	AttrAction    = temporal.NewSearchAttributeKeyKeyword("IamJobAction")
	AttrStatus    = temporal.NewSearchAttributeKeyKeyword("IamJobStatus")
	AttrProcessed = temporal.NewSearchAttributeKeyInt64("IamJobProcessed")
	AttrTotal     = temporal.NewSearchAttributeKeyInt64("IamJobTotal")
)

// SearchAttributes lists the custom search attributes the namespace must
// have, by name and type.
func SearchAttributes() map[string]enumspb.IndexedValueType {
	return map[string]enumspb.IndexedValueType{
		AttrJobID.GetName():     enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		AttrOrgID.GetName():     enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		AttrModule.GetName():    enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		AttrAction.GetName():    enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		AttrStatus.GetName():    enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		AttrProcessed.GetName(): enumspb.INDEXED_VALUE_TYPE_INT,
		AttrTotal.GetName():     enumspb.INDEXED_VALUE_TYPE_INT,

		AttrEventHookID.GetName():      enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		AttrEventHookBacklog.GetName(): enumspb.INDEXED_VALUE_TYPE_INT,
	}
}
