//! HOT template versions and the one table that says which intrinsic
//! function exists in which version and in which context (values or
//! conditions). Every version-dependent rule of the module is stated here.

use std::fmt;

use serde::{Serialize, Serializer};

/// A `heat_template_version` that Ember understands, ordered by date.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TemplateVersion {
    V2013_05_23,
    V2014_10_16,
    V2015_04_30,
    V2015_10_15,
    V2016_04_08,
    V2016_10_14,
    V2017_02_24,
    V2017_09_01,
    V2018_03_02,
    V2018_08_31,
    V2021_04_16,
}

impl TemplateVersion {
    pub const LATEST: TemplateVersion = TemplateVersion::V2021_04_16;

    pub const ALL: [TemplateVersion; 11] = [
        TemplateVersion::V2013_05_23,
        TemplateVersion::V2014_10_16,
        TemplateVersion::V2015_04_30,
        TemplateVersion::V2015_10_15,
        TemplateVersion::V2016_04_08,
        TemplateVersion::V2016_10_14,
        TemplateVersion::V2017_02_24,
        TemplateVersion::V2017_09_01,
        TemplateVersion::V2018_03_02,
        TemplateVersion::V2018_08_31,
        TemplateVersion::V2021_04_16,
    ];

    /// Accepts a version date (`2016-10-14`) or an OpenStack release name
    /// (`newton`).
    pub fn parse(text: &str) -> Option<TemplateVersion> {
        Self::ALL
            .into_iter()
            .find(|version| version.date() == text || version.release_name() == Some(text))
    }

    pub fn date(self) -> &'static str {
        match self {
            TemplateVersion::V2013_05_23 => "2013-05-23",
            TemplateVersion::V2014_10_16 => "2014-10-16",
            TemplateVersion::V2015_04_30 => "2015-04-30",
            TemplateVersion::V2015_10_15 => "2015-10-15",
            TemplateVersion::V2016_04_08 => "2016-04-08",
            TemplateVersion::V2016_10_14 => "2016-10-14",
            TemplateVersion::V2017_02_24 => "2017-02-24",
            TemplateVersion::V2017_09_01 => "2017-09-01",
            TemplateVersion::V2018_03_02 => "2018-03-02",
            TemplateVersion::V2018_08_31 => "2018-08-31",
            TemplateVersion::V2021_04_16 => "2021-04-16",
        }
    }

    pub fn release_name(self) -> Option<&'static str> {
        match self {
            TemplateVersion::V2016_10_14 => Some("newton"),
            TemplateVersion::V2017_02_24 => Some("ocata"),
            TemplateVersion::V2017_09_01 => Some("pike"),
            TemplateVersion::V2018_03_02 => Some("queens"),
            TemplateVersion::V2018_08_31 => Some("rocky"),
            TemplateVersion::V2021_04_16 => Some("wallaby"),
            _ => None,
        }
    }

    /// The `conditions` section and the `condition` keys of resources and
    /// outputs.
    pub fn supports_conditions(self) -> bool {
        self >= TemplateVersion::V2016_10_14
    }

    /// Resource `external_id` and the lower-case `delete`/`retain`
    /// deletion policies arrived with conditions.
    pub fn supports_external_id(self) -> bool {
        self >= TemplateVersion::V2016_10_14
    }

    pub fn supports_lowercase_deletion_policy(self) -> bool {
        self >= TemplateVersion::V2016_10_14
    }

    pub fn supports_modulo_constraint(self) -> bool {
        self >= TemplateVersion::V2017_02_24
    }

    pub fn supports_parameter_tags(self) -> bool {
        self >= TemplateVersion::V2018_03_02
    }

    /// `get_attr: [resource]` returning every attribute.
    pub fn supports_get_attr_all_attributes(self) -> bool {
        self >= TemplateVersion::V2015_10_15
    }

    /// `list_join` with several lists, and JSON-encoding of map/list items
    /// in `list_join` and `str_replace` params.
    pub fn supports_json_in_string_functions(self) -> bool {
        self >= TemplateVersion::V2015_10_15
    }

    /// `repeat` iterating over the keys of a map.
    pub fn supports_repeat_over_maps(self) -> bool {
        self >= TemplateVersion::V2016_10_14
    }

    /// `repeat` with `permutations: false`.
    pub fn supports_repeat_permutations(self) -> bool {
        self >= TemplateVersion::V2017_09_01
    }

    /// `if` with two arguments, dropping the enclosing item when false.
    pub fn supports_nullable_if(self) -> bool {
        self >= TemplateVersion::V2021_04_16
    }
}

impl fmt::Display for TemplateVersion {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.date())
    }
}

impl Serialize for TemplateVersion {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.date())
    }
}

/// Every intrinsic function name the module knows about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FunctionName {
    GetParam,
    GetResource,
    GetAttr,
    GetFile,
    ListJoin,
    StrReplace,
    StrReplaceStrict,
    StrReplaceVstrict,
    ResourceFacade,
    Digest,
    Repeat,
    StrSplit,
    MapMerge,
    MapReplace,
    If,
    Yaql,
    Filter,
    MakeUrl,
    ListConcat,
    ListConcatUnique,
    Contains,
    Equals,
    Not,
    And,
    Or,
    /// A CloudFormation-style function (`Fn::Join`, `Ref`, ...) that HOT
    /// keeps registered only to reject it.
    CloudFormation,
}

/// One row of the function table.
struct FunctionSpec {
    name: &'static str,
    function: FunctionName,
    /// First version where the function resolves in resource properties,
    /// outputs and other values; `None` when it never does.
    in_values_since: Option<TemplateVersion>,
    /// First version where the function may appear in condition
    /// expressions; `None` when it never may.
    in_conditions_since: Option<TemplateVersion>,
    /// Version from which HOT rejects the function as removed.
    removed_in: Option<TemplateVersion>,
}

use TemplateVersion as V;

const fn value_function(
    name: &'static str,
    function: FunctionName,
    since: TemplateVersion,
) -> FunctionSpec {
    FunctionSpec {
        name,
        function,
        in_values_since: Some(since),
        in_conditions_since: None,
        removed_in: None,
    }
}

const fn condition_function(
    name: &'static str,
    function: FunctionName,
    since: TemplateVersion,
) -> FunctionSpec {
    FunctionSpec {
        name,
        function,
        in_values_since: None,
        in_conditions_since: Some(since),
        removed_in: None,
    }
}

const fn cloudformation_function(name: &'static str, removed_in: TemplateVersion) -> FunctionSpec {
    FunctionSpec {
        name,
        function: FunctionName::CloudFormation,
        in_values_since: Some(V::V2013_05_23),
        in_conditions_since: None,
        removed_in: Some(removed_in),
    }
}

/// The function table, following Heat's per-version registries.
const FUNCTIONS: &[FunctionSpec] = &[
    FunctionSpec {
        name: "get_param",
        function: FunctionName::GetParam,
        in_values_since: Some(V::V2013_05_23),
        in_conditions_since: Some(V::V2016_10_14),
        removed_in: None,
    },
    value_function("get_resource", FunctionName::GetResource, V::V2013_05_23),
    value_function("get_attr", FunctionName::GetAttr, V::V2013_05_23),
    value_function("get_file", FunctionName::GetFile, V::V2013_05_23),
    value_function("list_join", FunctionName::ListJoin, V::V2013_05_23),
    value_function("str_replace", FunctionName::StrReplace, V::V2013_05_23),
    value_function(
        "resource_facade",
        FunctionName::ResourceFacade,
        V::V2013_05_23,
    ),
    value_function("digest", FunctionName::Digest, V::V2015_04_30),
    value_function("repeat", FunctionName::Repeat, V::V2015_04_30),
    value_function("str_split", FunctionName::StrSplit, V::V2015_10_15),
    value_function("map_merge", FunctionName::MapMerge, V::V2016_04_08),
    value_function("map_replace", FunctionName::MapReplace, V::V2016_10_14),
    value_function("if", FunctionName::If, V::V2016_10_14),
    FunctionSpec {
        name: "yaql",
        function: FunctionName::Yaql,
        in_values_since: Some(V::V2016_10_14),
        in_conditions_since: Some(V::V2017_09_01),
        removed_in: None,
    },
    value_function("filter", FunctionName::Filter, V::V2017_02_24),
    value_function(
        "str_replace_strict",
        FunctionName::StrReplaceStrict,
        V::V2017_02_24,
    ),
    value_function("make_url", FunctionName::MakeUrl, V::V2017_09_01),
    value_function("list_concat", FunctionName::ListConcat, V::V2017_09_01),
    value_function(
        "list_concat_unique",
        FunctionName::ListConcatUnique,
        V::V2017_09_01,
    ),
    value_function(
        "str_replace_vstrict",
        FunctionName::StrReplaceVstrict,
        V::V2017_09_01,
    ),
    FunctionSpec {
        name: "contains",
        function: FunctionName::Contains,
        in_values_since: Some(V::V2017_09_01),
        in_conditions_since: Some(V::V2017_09_01),
        removed_in: None,
    },
    condition_function("equals", FunctionName::Equals, V::V2016_10_14),
    condition_function("not", FunctionName::Not, V::V2016_10_14),
    condition_function("and", FunctionName::And, V::V2016_10_14),
    condition_function("or", FunctionName::Or, V::V2016_10_14),
    cloudformation_function("Fn::GetAZs", V::V2014_10_16),
    cloudformation_function("Fn::Join", V::V2014_10_16),
    cloudformation_function("Fn::Split", V::V2014_10_16),
    cloudformation_function("Fn::Replace", V::V2014_10_16),
    cloudformation_function("Fn::Base64", V::V2014_10_16),
    cloudformation_function("Fn::MemberListToMap", V::V2014_10_16),
    cloudformation_function("Fn::ResourceFacade", V::V2014_10_16),
    cloudformation_function("Ref", V::V2014_10_16),
    cloudformation_function("Fn::Select", V::V2015_10_15),
];

/// Where a snippet is being interpreted: condition expressions accept a
/// different set of functions than ordinary values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EvaluationMode {
    Value,
    Condition,
}

/// What a single-key map `{key: args}` means in a given version and mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Classification {
    /// Not a function here: the map is plain data, as Heat treats it.
    Data,
    Function(FunctionName),
    /// A known function that cannot be used here; the text says why.
    Rejected(String),
}

/// Decides whether `{key: ...}` is a function call, plain data or an error.
///
/// Heat treats a single-key map as a function only when the key is
/// registered; Ember additionally rejects functions that exist in a later
/// version than the template's, because silently passing them through as
/// data hides template mistakes.
pub fn classify(key: &str, version: TemplateVersion, mode: EvaluationMode) -> Classification {
    let Some(spec) = FUNCTIONS.iter().find(|spec| spec.name == key) else {
        return Classification::Data;
    };
    if spec.function == FunctionName::CloudFormation {
        return match spec.removed_in {
            Some(removed) if version >= removed => Classification::Rejected(format!(
                "the function {key} is not supported in heat_template_version {version}"
            )),
            _ => Classification::Rejected(format!(
                "the CloudFormation function {key} is not supported by Ember"
            )),
        };
    }
    let since = match mode {
        EvaluationMode::Value => spec.in_values_since,
        EvaluationMode::Condition => spec.in_conditions_since,
    };
    match (mode, since) {
        // Condition-only functions are not registered for values in Heat,
        // so there they are ordinary data.
        (EvaluationMode::Value, None) => Classification::Data,
        (EvaluationMode::Condition, None) => {
            Classification::Rejected(format!("the function {key} cannot be used in a condition"))
        }
        (_, Some(since)) if version < since => Classification::Rejected(format!(
            "the function {key} requires heat_template_version {since} or later (the template uses {version})"
        )),
        (_, Some(_)) if spec.function == FunctionName::Yaql => {
            Classification::Rejected("yaql is not supported by Ember".to_string())
        }
        (_, Some(_)) => Classification::Function(spec.function),
    }
}

/// What a function does, in the words Heat's function listing uses (the
/// first line of its implementation's documentation; clients and
/// conformance suites compare them).
fn description(function: FunctionName, version: TemplateVersion) -> &'static str {
    match function {
        FunctionName::GetParam => "A function for resolving parameter references.",
        FunctionName::GetResource => "A function for resolving resource references.",
        FunctionName::GetAttr => "A function for resolving resource attributes.",
        FunctionName::GetFile => "A function for including a file inline.",
        FunctionName::ListJoin if version.supports_json_in_string_functions() => {
            "A function for joining one or more lists of strings."
        }
        FunctionName::ListJoin => "A function for joining strings.",
        FunctionName::StrReplace
        | FunctionName::StrReplaceStrict
        | FunctionName::StrReplaceVstrict => "A function for performing string substitutions.",
        FunctionName::ResourceFacade => {
            "A function for retrieving data in a parent provider template."
        }
        FunctionName::Digest => "A function for performing digest operations.",
        FunctionName::Repeat if version.supports_repeat_over_maps() => {
            "A function for iterating over a list of items or a dict of keys."
        }
        FunctionName::Repeat => "A function for iterating over a list of items.",
        FunctionName::StrSplit => "A function for splitting delimited strings into a list.",
        FunctionName::MapMerge => "A function for merging maps.",
        // Heat's make_url shares map_replace's description.
        FunctionName::MapReplace | FunctionName::MakeUrl => {
            "A function for performing substitutions on maps."
        }
        FunctionName::If => {
            "A function to return corresponding value based on condition evaluation."
        }
        FunctionName::Yaql => "A function for executing a yaql expression.",
        FunctionName::Filter => "A function for filtering out values from lists.",
        FunctionName::ListConcat => "A function for extending lists.",
        FunctionName::ListConcatUnique => "A function for extending lists with unique items.",
        FunctionName::Contains => "A function for checking whether specific value is in sequence.",
        FunctionName::Equals => "A function for comparing whether two values are equal.",
        FunctionName::Not => "A function that acts as a NOT operator on a condition.",
        FunctionName::And => "A function that acts as an AND operator on conditions.",
        FunctionName::Or => "A function that acts as an OR operator on conditions.",
        FunctionName::CloudFormation => "A CloudFormation function.",
    }
}

/// The functions a template of `version` may use, with their
/// descriptions, as Heat lists them: those of values, plus (with
/// `with_conditions`) those only conditions may use. Functions Ember
/// refuses (yaql; CloudFormation functions in HOT) are not listed.
pub fn template_functions(
    version: TemplateVersion,
    with_conditions: bool,
) -> Vec<(&'static str, &'static str)> {
    FUNCTIONS
        .iter()
        .filter(|spec| {
            !matches!(
                spec.function,
                FunctionName::CloudFormation | FunctionName::Yaql
            )
        })
        .filter(|spec| {
            let in_values = spec.in_values_since.is_some_and(|since| since <= version);
            let in_conditions = with_conditions
                && spec
                    .in_conditions_since
                    .is_some_and(|since| since <= version);
            in_values || in_conditions
        })
        .map(|spec| (spec.name, description(spec.function, version)))
        .collect()
}

/// `(name, first version in values, first version in conditions)` for every
/// HOT function Ember resolves; used by documentation and tests.
pub fn function_versions() -> Vec<(
    &'static str,
    Option<TemplateVersion>,
    Option<TemplateVersion>,
)> {
    FUNCTIONS
        .iter()
        .filter(|spec| spec.function != FunctionName::CloudFormation)
        .map(|spec| (spec.name, spec.in_values_since, spec.in_conditions_since))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn functions_are_listed_per_version_as_heat_lists_them() {
        let names = |version, conditions| -> Vec<&str> {
            template_functions(version, conditions)
                .into_iter()
                .map(|(name, _)| name)
                .collect()
        };
        let oldest = names(V::V2013_05_23, false);
        assert!(oldest.contains(&"get_file") && oldest.contains(&"str_replace"));
        assert!(!oldest.contains(&"repeat") && !oldest.contains(&"Fn::Join"));
        assert!(names(V::V2015_04_30, false).contains(&"repeat"));
        let newton = names(V::V2016_10_14, false);
        assert!(newton.contains(&"if") && !newton.contains(&"equals"));
        assert!(!newton.contains(&"yaql"), "Ember refuses yaql");
        let with_conditions = names(V::V2016_10_14, true);
        assert!(with_conditions.contains(&"equals") && with_conditions.contains(&"or"));
        assert_eq!(
            with_conditions
                .iter()
                .filter(|name| **name == "get_param")
                .count(),
            1
        );
        let described: std::collections::HashMap<_, _> = template_functions(V::V2016_10_14, false)
            .into_iter()
            .collect();
        assert_eq!(
            described["get_file"],
            "A function for including a file inline."
        );
        assert_eq!(
            described["repeat"],
            "A function for iterating over a list of items or a dict of keys."
        );
        let described: std::collections::HashMap<_, _> = template_functions(V::V2015_04_30, false)
            .into_iter()
            .collect();
        assert_eq!(described["list_join"], "A function for joining strings.");
    }

    #[test]
    fn parses_dates_and_release_names() {
        assert_eq!(TemplateVersion::parse("2013-05-23"), Some(V::V2013_05_23));
        assert_eq!(TemplateVersion::parse("newton"), Some(V::V2016_10_14));
        assert_eq!(TemplateVersion::parse("ocata"), Some(V::V2017_02_24));
        assert_eq!(TemplateVersion::parse("pike"), Some(V::V2017_09_01));
        assert_eq!(TemplateVersion::parse("queens"), Some(V::V2018_03_02));
        assert_eq!(TemplateVersion::parse("rocky"), Some(V::V2018_08_31));
        assert_eq!(TemplateVersion::parse("wallaby"), Some(V::V2021_04_16));
        assert_eq!(TemplateVersion::parse("2016-10-15"), None);
        assert_eq!(TemplateVersion::parse("Newton"), None);
    }

    #[test]
    fn versions_are_ordered_by_date() {
        let mut sorted = TemplateVersion::ALL;
        sorted.sort();
        assert_eq!(sorted, TemplateVersion::ALL);
        assert_eq!(TemplateVersion::LATEST.to_string(), "2021-04-16");
    }

    #[test]
    fn unknown_keys_are_data() {
        assert_eq!(
            classify("get_parm", V::LATEST, EvaluationMode::Value),
            Classification::Data
        );
    }

    #[test]
    fn functions_newer_than_the_template_are_rejected() {
        let Classification::Rejected(message) =
            classify("map_merge", V::V2015_10_15, EvaluationMode::Value)
        else {
            panic!("expected a rejection");
        };
        assert!(message.contains("requires heat_template_version 2016-04-08"));
        assert_eq!(
            classify("map_merge", V::V2016_04_08, EvaluationMode::Value),
            Classification::Function(FunctionName::MapMerge)
        );
    }

    #[test]
    fn condition_functions_are_data_in_values_and_functions_in_conditions() {
        assert_eq!(
            classify("equals", V::LATEST, EvaluationMode::Value),
            Classification::Data
        );
        assert_eq!(
            classify("equals", V::LATEST, EvaluationMode::Condition),
            Classification::Function(FunctionName::Equals)
        );
        assert!(matches!(
            classify("str_replace", V::LATEST, EvaluationMode::Condition),
            Classification::Rejected(message) if message.contains("cannot be used in a condition")
        ));
        assert!(matches!(
            classify("contains", V::V2016_10_14, EvaluationMode::Condition),
            Classification::Rejected(message) if message.contains("2017-09-01")
        ));
    }

    #[test]
    fn cloudformation_functions_and_yaql_are_rejected() {
        assert!(matches!(
            classify("Fn::Select", V::V2015_10_15, EvaluationMode::Value),
            Classification::Rejected(message) if message.contains("not supported in heat_template_version 2015-10-15")
        ));
        assert!(matches!(
            classify("Ref", V::V2013_05_23, EvaluationMode::Value),
            Classification::Rejected(message) if message.contains("not supported by Ember")
        ));
        assert_eq!(
            classify("yaql", V::LATEST, EvaluationMode::Value),
            Classification::Rejected("yaql is not supported by Ember".to_string())
        );
    }

    #[test]
    fn function_versions_lists_hot_functions_only() {
        let versions = function_versions();
        assert!(versions.contains(&("repeat", Some(V::V2015_04_30), None)));
        assert!(versions.contains(&("equals", None, Some(V::V2016_10_14))));
        assert!(!versions.iter().any(|(name, _, _)| name.starts_with("Fn::")));
    }
}
