//! How many nodes a scale or resize request means (Senlin's
//! `scaleutils`): adjustment types, the size checks a request must pass
//! (with Senlin's messages, which its clients and API suite compare),
//! min/max clamping and `strict`.

use super::Cluster;
use crate::error::{Error, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdjustmentType {
    ExactCapacity,
    ChangeInCapacity,
    ChangeInPercentage,
}

impl AdjustmentType {
    pub fn parse(text: &str) -> Result<AdjustmentType> {
        match text {
            "EXACT_CAPACITY" => Ok(AdjustmentType::ExactCapacity),
            "CHANGE_IN_CAPACITY" => Ok(AdjustmentType::ChangeInCapacity),
            "CHANGE_IN_PERCENTAGE" => Ok(AdjustmentType::ChangeInPercentage),
            // Senlin's message (one of EXACT_CAPACITY, CHANGE_IN_CAPACITY
            // or CHANGE_IN_PERCENTAGE is expected).
            other => Err(Error::InvalidInput(format!(
                "Value '{other}' is not acceptable for field 'adjustment_type'."
            ))),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            AdjustmentType::ExactCapacity => "EXACT_CAPACITY",
            AdjustmentType::ChangeInCapacity => "CHANGE_IN_CAPACITY",
            AdjustmentType::ChangeInPercentage => "CHANGE_IN_PERCENTAGE",
        }
    }
}

/// Refuses a capacity field below its floor (0 for sizes, -1 for a
/// max_size, meaning unlimited), in Senlin's words.
pub fn check_capacity_field(field: &str, value: i32, minimum: i32) -> Result<()> {
    if value < minimum {
        return Err(Error::InvalidInput(format!(
            "The value for the {field} field must be greater than or equal to {minimum}."
        )));
    }
    Ok(())
}

/// Checks the sizes a request gives (`None` = not given) against each
/// other and against `cluster`'s (none for a cluster being created), as
/// Senlin's `check_size_params` does, in its order and words. `strict`
/// also refuses what a lenient request would have clamped: a capacity
/// outside the cluster's range, a new range the current capacity is
/// outside of. A max_size of -1 (or any negative) means unlimited.
pub fn check_size_params(
    cluster: Option<&Cluster>,
    desired: Option<i32>,
    min_size: Option<i32>,
    max_size: Option<i32>,
    strict: bool,
) -> Result<()> {
    let refuse = |message: String| Err(Error::InvalidInput(message));
    if let Some(desired) = desired {
        match (min_size, cluster) {
            (Some(min_size), _) if desired < min_size => {
                return refuse(format!(
                    "The target capacity ({desired}) is less than the specified min_size ({min_size})."
                ));
            }
            (None, Some(cluster)) if strict && desired < cluster.min_size => {
                return refuse(format!(
                    "The target capacity ({desired}) is less than the cluster's min_size ({}).",
                    cluster.min_size
                ));
            }
            _ => {}
        }
        match (max_size, cluster) {
            (Some(max_size), _) if max_size >= 0 && desired > max_size => {
                return refuse(format!(
                    "The target capacity ({desired}) is greater than the specified max_size ({max_size})."
                ));
            }
            (None, Some(cluster))
                if strict && cluster.max_size >= 0 && desired > cluster.max_size =>
            {
                return refuse(format!(
                    "The target capacity ({desired}) is greater than the cluster's max_size ({}).",
                    cluster.max_size
                ));
            }
            _ => {}
        }
    }
    if let Some(min_size) = min_size {
        match (max_size, cluster) {
            (Some(max_size), _) if max_size >= 0 && min_size > max_size => {
                return refuse(format!(
                    "The specified min_size ({min_size}) is greater than the specified max_size ({max_size})."
                ));
            }
            (None, Some(cluster)) if cluster.max_size >= 0 && min_size > cluster.max_size => {
                return refuse(format!(
                    "The specified min_size ({min_size}) is greater than the current max_size ({}) of the cluster.",
                    cluster.max_size
                ));
            }
            _ => {}
        }
        if let Some(cluster) = cluster
            && desired.is_none()
            && strict
            && min_size > cluster.desired_capacity
        {
            return refuse(format!(
                "The specified min_size ({min_size}) is greater than the current desired_capacity ({}) of the cluster.",
                cluster.desired_capacity
            ));
        }
    }
    if let (Some(max_size), Some(cluster)) = (max_size, cluster)
        && max_size >= 0
    {
        if min_size.is_none() && max_size < cluster.min_size {
            return refuse(format!(
                "The specified max_size ({max_size}) is less than the current min_size ({}) of the cluster.",
                cluster.min_size
            ));
        }
        if desired.is_none() && strict && max_size < cluster.desired_capacity {
            return refuse(format!(
                "The specified max_size ({max_size}) is less than the current desired_capacity ({}) of the cluster.",
                cluster.desired_capacity
            ));
        }
    }
    Ok(())
}

/// The desired capacity an adjustment asks for, from `current`. Never
/// below 0; a result beyond `i32` is an error, never an overflow.
pub fn desired_after(
    current: i32,
    adjustment: AdjustmentType,
    number: f64,
    min_step: i32,
) -> Result<i32> {
    if !number.is_finite() {
        return Err(Error::InvalidInput(format!(
            "number {number} is not a number"
        )));
    }
    let out_of_range = || {
        Error::InvalidInput(format!(
            "number {number} is out of range: the new capacity must fit in {} nodes",
            i32::MAX
        ))
    };
    // Every magnitude that fits an i32 capacity fits an i64 exactly as a
    // whole f64; anything larger is refused before it is converted.
    let whole = |value: f64| -> Result<i64> {
        if value.abs() > f64::from(i32::MAX) * 2.0 {
            return Err(out_of_range());
        }
        Ok(value as i64)
    };
    let desired = match adjustment {
        AdjustmentType::ExactCapacity => {
            if number < 0.0 || number.fract() != 0.0 {
                return Err(Error::InvalidInput(format!(
                    "number {number} must be a non-negative integer for EXACT_CAPACITY"
                )));
            }
            whole(number)?
        }
        AdjustmentType::ChangeInCapacity => {
            if number.fract() != 0.0 {
                return Err(Error::InvalidInput(format!(
                    "number {number} must be an integer for CHANGE_IN_CAPACITY"
                )));
            }
            i64::from(current)
                .checked_add(whole(number)?)
                .ok_or_else(out_of_range)?
        }
        AdjustmentType::ChangeInPercentage => {
            let delta = f64::from(current) * number / 100.0;
            let mut step = whole(if delta > 0.0 {
                delta.floor()
            } else {
                delta.ceil()
            })?;
            if step.abs() < i64::from(min_step) && number != 0.0 {
                step = if number > 0.0 {
                    i64::from(min_step)
                } else {
                    -i64::from(min_step)
                };
            }
            i64::from(current)
                .checked_add(step)
                .ok_or_else(out_of_range)?
        }
    };
    i32::try_from(desired.max(0)).map_err(|_| out_of_range())
}

/// The capacity `count` more nodes make from `current`, checked against
/// `max_size` (-1 = unlimited): a count beyond `i32` is refused, and a
/// capacity beyond the maximum as Senlin's scale-out action words it.
pub fn grown_by(current: i32, count: u64, max_size: i32) -> Result<i32> {
    let desired = current.checked_add(counted(count)?).ok_or_else(|| {
        Error::InvalidInput(format!(
            "count {count} is out of range: a cluster holds at most {} nodes",
            i32::MAX
        ))
    })?;
    if max_size != -1 && desired > max_size {
        return Err(Error::Conflict(format!(
            "The target capacity ({desired}) is greater than the cluster's max_size ({max_size})."
        )));
    }
    Ok(desired)
}

/// The capacity `count` fewer nodes leave from `current`, checked against
/// `min_size` (worded as Senlin's scale-in action words it).
pub fn shrunk_by(current: i32, count: u64, min_size: i32) -> Result<i32> {
    let count = counted(count)?;
    let desired = i64::from(current) - i64::from(count);
    if desired < i64::from(min_size) {
        return Err(Error::Conflict(format!(
            "The target capacity ({desired}) is less than the cluster's min_size ({min_size})."
        )));
    }
    i32::try_from(desired)
        .map_err(|_| Error::InvalidInput(format!("count {count} is out of range")))
}

/// A node count as a capacity: one beyond `i32` is refused.
pub fn counted(count: u64) -> Result<i32> {
    i32::try_from(count).map_err(|_| {
        Error::InvalidInput(format!(
            "count {count} is out of range: a cluster holds at most {} nodes",
            i32::MAX
        ))
    })
}

/// Checks `desired` against the sizes: strict refuses, otherwise clamps.
pub fn fit(desired: i32, min_size: i32, max_size: i32, strict: bool) -> Result<i32> {
    let above_max = max_size != -1 && desired > max_size;
    if strict && (desired < min_size || above_max) {
        // A bad request, as Senlin answers it (400), not a state conflict.
        return Err(Error::InvalidInput(format!(
            "the new capacity {desired} is outside min_size {min_size} and max_size {max_size}"
        )));
    }
    let clamped = desired.max(min_size);
    Ok(if max_size != -1 {
        clamped.min(max_size)
    } else {
        clamped
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adjustments_compute_like_senlin() {
        assert_eq!(
            desired_after(4, AdjustmentType::ExactCapacity, 2.0, 1).ok(),
            Some(2)
        );
        assert_eq!(
            desired_after(4, AdjustmentType::ChangeInCapacity, -3.0, 1).ok(),
            Some(1)
        );
        assert_eq!(
            desired_after(10, AdjustmentType::ChangeInPercentage, 25.0, 1).ok(),
            Some(12)
        );
        assert_eq!(
            desired_after(2, AdjustmentType::ChangeInPercentage, 10.0, 1).ok(),
            Some(3)
        );
        assert!(desired_after(2, AdjustmentType::ExactCapacity, 1.5, 1).is_err());
        assert_eq!(fit(5, 1, 3, false).ok(), Some(3));
        assert!(fit(5, 1, 3, true).is_err());
        assert_eq!(fit(0, 1, -1, false).ok(), Some(1));
    }

    /// A cluster of these sizes (min, max, desired).
    fn cluster(min_size: i32, max_size: i32, desired_capacity: i32) -> Cluster {
        let now = chrono::Utc::now();
        Cluster {
            id: uuid::Uuid::now_v7(),
            name: "web".into(),
            profile_id: uuid::Uuid::now_v7(),
            min_size,
            max_size,
            desired_capacity,
            status: super::super::ClusterStatus::Active,
            status_reason: String::new(),
            metadata: serde_json::Map::new(),
            next_index: 1,
            timeout: None,
            config: crate::domain::cluster::ClusterConfig::default(),
            project_id: "project".into(),
            user_id: "user".into(),
            created_at: now,
            updated_at: now,
            maintenance_lock: None,
        }
    }

    /// The message `check_size_params` refuses with, or "" when it accepts.
    fn refusal(
        cluster: Option<&Cluster>,
        desired: Option<i32>,
        min_size: Option<i32>,
        max_size: Option<i32>,
        strict: bool,
    ) -> String {
        match check_size_params(cluster, desired, min_size, max_size, strict) {
            Ok(()) => String::new(),
            Err(Error::InvalidInput(message)) => message,
            Err(other) => panic!("{other:?}"),
        }
    }

    #[test]
    fn size_checks_say_what_senlin_says() {
        let web = cluster(2, 5, 3);
        let web = Some(&web);
        assert_eq!(
            refusal(web, Some(6), None, None, true),
            "The target capacity (6) is greater than the cluster's max_size (5)."
        );
        assert_eq!(
            refusal(web, Some(1), None, None, true),
            "The target capacity (1) is less than the cluster's min_size (2)."
        );
        assert_eq!(
            refusal(web, Some(6), None, None, false),
            "",
            "clamped later"
        );
        assert_eq!(
            refusal(web, None, None, Some(2), true),
            "The specified max_size (2) is less than the current desired_capacity (3) of the cluster."
        );
        assert_eq!(refusal(web, None, None, Some(2), false), "");
        for strict in [true, false] {
            assert_eq!(
                refusal(web, None, None, Some(1), strict),
                "The specified max_size (1) is less than the current min_size (2) of the cluster."
            );
            assert_eq!(
                refusal(web, None, Some(6), None, strict),
                "The specified min_size (6) is greater than the current max_size (5) of the cluster."
            );
        }
        assert_eq!(
            refusal(web, None, Some(4), None, true),
            "The specified min_size (4) is greater than the current desired_capacity (3) of the cluster."
        );
        assert_eq!(
            refusal(web, Some(4), Some(5), Some(10), true),
            "The target capacity (4) is less than the specified min_size (5)."
        );
        assert_eq!(
            refusal(None, Some(2), Some(5), Some(3), true),
            "The target capacity (2) is less than the specified min_size (5)."
        );
        assert_eq!(
            refusal(None, Some(3), Some(5), Some(3), true),
            "The target capacity (3) is less than the specified min_size (5)."
        );
        assert_eq!(
            refusal(None, Some(5), Some(5), Some(3), true),
            "The target capacity (5) is greater than the specified max_size (3)."
        );
        assert_eq!(refusal(None, Some(50), Some(0), Some(-1), true), "");
        let unlimited = cluster(0, -1, 3);
        assert_eq!(refusal(Some(&unlimited), Some(1000), None, None, true), "");
        assert_eq!(
            AdjustmentType::parse("bogus")
                .expect_err("unknown")
                .to_string(),
            "Value 'bogus' is not acceptable for field 'adjustment_type'."
        );
    }

    #[test]
    fn counts_beyond_i32_or_max_size_are_refused_up_front() {
        assert_eq!(grown_by(2, 3, 10).ok(), Some(5));
        assert_eq!(grown_by(2, 3, -1).ok(), Some(5));
        assert!(matches!(grown_by(2, 9, 10), Err(Error::Conflict(m))
            if m == "The target capacity (11) is greater than the cluster's max_size (10)."));
        assert!(matches!(
            grown_by(2, u64::from(u32::MAX), -1),
            Err(Error::InvalidInput(_))
        ));
        assert!(matches!(
            grown_by(i32::MAX, 1, -1),
            Err(Error::InvalidInput(_))
        ));
        assert_eq!(shrunk_by(5, 2, 1).ok(), Some(3));
        assert!(matches!(shrunk_by(5, 5, 1), Err(Error::Conflict(m))
            if m == "The target capacity (0) is less than the cluster's min_size (1)."));
        assert!(shrunk_by(5, u64::MAX, 0).is_err());
        assert!(desired_after(1, AdjustmentType::ChangeInCapacity, 1e300, 1).is_err());
        assert!(desired_after(i32::MAX, AdjustmentType::ChangeInCapacity, 1.0, 1).is_err());
        assert!(desired_after(i32::MAX, AdjustmentType::ChangeInPercentage, 1e12, 1).is_err());
        assert_eq!(
            desired_after(3, AdjustmentType::ChangeInCapacity, -1e9, 1).ok(),
            Some(0)
        );
    }

    mod properties {
        use proptest::prelude::*;

        use super::super::*;

        fn adjustment() -> impl Strategy<Value = AdjustmentType> {
            prop_oneof![
                Just(AdjustmentType::ExactCapacity),
                Just(AdjustmentType::ChangeInCapacity),
                Just(AdjustmentType::ChangeInPercentage),
            ]
        }

        /// Whole numbers of every size, and fractions for percentages.
        fn number() -> impl Strategy<Value = f64> {
            prop_oneof![
                (-1_000i64..1_000).prop_map(|n| n as f64),
                any::<i64>().prop_map(|n| n as f64),
                -1e6f64..1e6,
                Just(f64::MAX),
                Just(-f64::MAX),
            ]
        }

        proptest! {
            /// Never a panic or an overflow: a capacity within i32, at least
            /// 0, or an InvalidInput error.
            #[test]
            fn any_adjustment_is_a_capacity_or_a_clear_error(
                current in 0..=i32::MAX,
                adjustment in adjustment(),
                number in number(),
                min_step in 0..=i32::MAX,
            ) {
                match desired_after(current, adjustment, number, min_step) {
                    Ok(desired) => prop_assert!(desired >= 0),
                    Err(error) => prop_assert!(matches!(error, Error::InvalidInput(_)), "{error:?}"),
                }
            }

            /// An increase never lowers the capacity, a decrease never
            /// raises it.
            #[test]
            fn changes_move_the_capacity_the_way_they_say(
                current in 0..100_000i32,
                change in -1_000_000i64..1_000_000,
                percentage in -1_000.0f64..1_000.0,
                min_step in 0..100i32,
            ) {
                let number = change as f64;
                if let Ok(desired) = desired_after(current, AdjustmentType::ChangeInCapacity, number, min_step) {
                    if change >= 0 { prop_assert!(desired >= current) } else { prop_assert!(desired <= current) }
                }
                if let Ok(desired) = desired_after(current, AdjustmentType::ChangeInPercentage, percentage, min_step) {
                    if percentage >= 0.0 { prop_assert!(desired >= current) } else { prop_assert!(desired <= current) }
                }
            }

            /// Not strict: always within [min, max] (max -1 = unlimited).
            /// Strict: accepted exactly when already within, unchanged.
            #[test]
            fn fitting_stays_within_the_sizes(
                desired in any::<i32>(),
                min_size in 0..1_000i32,
                extra in prop_oneof![Just(None), (0..1_000i32).prop_map(Some)],
            ) {
                let max_size = extra.map_or(-1, |extra| min_size + extra);
                let fitted = fit(desired, min_size, max_size, false);
                prop_assert!(fitted.is_ok());
                let fitted = fitted.unwrap_or_default();
                prop_assert!(fitted >= min_size);
                prop_assert!(max_size == -1 || fitted <= max_size);
                let within = desired >= min_size && (max_size == -1 || desired <= max_size);
                match fit(desired, min_size, max_size, true) {
                    Ok(strict) => { prop_assert!(within); prop_assert_eq!(strict, desired) }
                    Err(_) => prop_assert!(!within),
                }
            }

            /// Scaling by a count: within [min, max] or an error, for any
            /// count a request can carry.
            #[test]
            fn scaling_by_a_count_respects_the_sizes_or_says_why(
                current in 0..=i32::MAX,
                count in any::<u64>(),
                min_size in 0..1_000i32,
                max_size in prop_oneof![Just(-1), 0..=i32::MAX],
            ) {
                if let Ok(desired) = grown_by(current, count, max_size) {
                    prop_assert!(desired >= current);
                    prop_assert!(max_size == -1 || desired <= max_size);
                }
                if let Ok(desired) = shrunk_by(current, count, min_size) {
                    prop_assert!(desired <= current);
                    prop_assert!(desired >= min_size);
                }
            }
        }
    }
}
