//! How many nodes a scale or resize request means (Senlin's
//! `scaleutils`): adjustment types, min/max clamping and `strict`.

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
            other => Err(Error::InvalidInput(format!(
                "adjustment_type {other:?} must be EXACT_CAPACITY, CHANGE_IN_CAPACITY or CHANGE_IN_PERCENTAGE"
            ))),
        }
    }
}

/// The desired capacity an adjustment asks for, from `current`.
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
    let desired = match adjustment {
        AdjustmentType::ExactCapacity => {
            if number < 0.0 || number.fract() != 0.0 {
                return Err(Error::InvalidInput(format!(
                    "number {number} must be a non-negative integer for EXACT_CAPACITY"
                )));
            }
            number as i64
        }
        AdjustmentType::ChangeInCapacity => {
            if number.fract() != 0.0 {
                return Err(Error::InvalidInput(format!(
                    "number {number} must be an integer for CHANGE_IN_CAPACITY"
                )));
            }
            i64::from(current) + number as i64
        }
        AdjustmentType::ChangeInPercentage => {
            let delta = f64::from(current) * number / 100.0;
            let mut step = if delta > 0.0 {
                delta.floor()
            } else {
                delta.ceil()
            } as i64;
            if step.abs() < i64::from(min_step) && number != 0.0 {
                step = i64::from(min_step) * number.signum() as i64;
            }
            i64::from(current) + step
        }
    };
    i32::try_from(desired.max(0))
        .map_err(|_| Error::InvalidInput(format!("number {number} is out of range")))
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
}
