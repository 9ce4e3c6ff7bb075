//! # What tollgate promises
//!
//! Every promise the library makes, as one rule each, with the test or fuzz target that checks
//! it. A rule names its tests as `file::function` (integration tests under `tests/`, loom
//! models under `loom-tests/tests/`, unit tests under `src/`); a fuzz target is named with the
//! constant of `fuzz/src/` that quotes the rule (`fuzz single: check::ADMIT_TOKEN`). The fuzz
//! models quote these rules word for word: change a rule, and change its quote with it
//! (`tests/promises_quoted.rs` checks that every quote is still here).
//!
//! Each rule starts with its name in bold, which the fuzz quotes and the other chapters use.
//!
//! # Time
//!
//! - **horizon**: Time is `u64` nanoseconds since the clock's zero, clamped at 2^62 ns (about
//!   146 years). *Checked by* `edge_cases::a_clock_reading_u64_max_is_the_horizon`,
//!   `edge_cases::duration_max_advances_saturate`; fuzz `config`.
//! - **clock-back**: A clock reading older than the state never re-earns capacity (quanta's
//!   TSC stepping back across cores, a reset user clock, a thread pre-empted between its
//!   reading and its decision). *Checked by* `edge_cases::stepping_back_never_re_earns_capacity`,
//!   `edge_cases::backward_steps_admit_nothing_beyond_the_quota`,
//!   `threads::a_clock_stepping_back_under_contention_never_exceeds_the_quota`, loom
//!   `cell::stale_reading_racing_fresh_one_never_over_admits`.
//! - **clock-back-bucket**: The buckets decide a reading older than the state at the state's
//!   time. *Checked by* `edge_cases::stepping_back_never_re_earns_capacity`.
//! - **clock-back-window**: A window decides a reading older than its state's window in the
//!   state's window, with its counts (waits measured from the reading); a sliding window
//!   decides it at that window's start, where the previous window weighs the most. A backward
//!   step alone never denies a request the state's time would admit, and `peek_n(0)` reports
//!   what is left then. The Redis exact mode does the same. *Checked by*
//!   `promises::a_fixed_window_read_behind_an_unbooked_state_decides_at_the_states_time`,
//!   `promises::a_sliding_window_read_behind_an_unbooked_state_decides_at_the_states_time`,
//!   `redis::exact::exact_fixed_window_read_behind_decides_at_the_states_time`,
//!   `redis::exact::exact_sliding_window_read_behind_decides_at_the_states_time`.
//! - **clock-back-log**: A sliding log decides a reading older than its newest entry at that
//!   entry's time, unless a reservation booked that entry for a later time: a reservation
//!   read behind is booked there with no wait when it fits (a later booking waits from the
//!   reading), and `give_back` gives back what is held then. Whether a booking is pending is
//!   what the bookings recorded, never inferred from a reading: a roll-back, a cancel or a
//!   charge's give-back read behind the newest entry leaves the log pending only if it was
//!   before the booking given back. The Redis exact mode books nothing ahead and does the
//!   same. *Checked by*
//!   `promises::a_sliding_log_reservation_read_behind_books_at_the_states_time`,
//!   `promises::a_sliding_log_given_back_behind_its_newest_entry_is_not_marked_booked`,
//!   `charge_log::a_log_given_back_behind_its_newest_entry_gives_what_the_states_time_holds`,
//!   `redis::exact::exact_sliding_log_given_back_behind_its_newest_entry_gives_what_it_holds`.
//! - **clock-back-booked**: Behind a window that a reservation moved the state into, nothing is
//!   admitted before that window starts. *Checked by*
//!   `promises::a_fixed_window_read_behind_a_booking_still_queues`,
//!   `promises::a_sliding_window_read_behind_a_booking_still_queues`.
//! - **stale-boundary**: A request denied only because another request moved the state into
//!   a later window after its reading is decided once more at a fresh reading before the
//!   denial is returned. *Checked by*
//!   `promises::a_stale_reading_at_a_window_boundary_is_not_falsely_denied`,
//!   `promises::a_stale_reading_of_a_spent_window_is_still_denied`.
//! - **coarse-clock**: A limiter on a `CoarseClock` never admits more than the quota over the
//!   true time. *Checked by* `coarse_clock::a_coarse_clock_never_admits_more_than_the_quota_over_true_time`.
//! - **system-clock**: `SystemClock` is wall time since the Unix epoch and never decreases
//!   within a process. *Checked by* `src/clock/mod.rs::tests::system_clock_is_wall_time_and_never_decreases`.
//!
//! # The algorithms
//!
//! - **token-bucket**: `TokenBucket` is GCRA: a request of cost `n` at `t` is admitted iff
//!   `max(TAT, t) + n·T − t ≤ burst·T`. *Checked by* `algorithms::token_bucket_matches_debt_model`;
//!   fuzz `single`, `keyed`: `check::ADMIT_TOKEN`.
//! - **governor**: `TokenBucket` agrees with governor decision for decision, at every burst
//!   boundary. *Checked by* `governor_diff::token_bucket_agrees_with_governor`,
//!   `governor_diff::burst_boundaries_agree_with_governor`.
//! - **interval**: `T = ⌈P / limit⌉` the emission interval in whole nanoseconds, rounded **up**
//!   so the limit is never exceeded. *Checked by*
//!   `gcra_rounding::buckets_never_exceed_the_quota_with_non_integral_intervals`,
//!   `gcra_rounding::six_hundred_million_per_second_is_never_exceeded`; fuzz `single`.
//! - **leaky-bucket**: `LeakyBucket` admits exactly what `TokenBucket` admits. *Checked by*
//!   `algorithms::leaky_bucket_admits_as_token_bucket`; fuzz: `check::ADMIT_LEAKY`.
//! - **delay**: `Decision::delay()` says how long to hold each admitted request so releases are
//!   spaced by `T`: `max(TAT, t) − t` for the leaky bucket, zero for the others. *Checked by*
//!   `algorithms::leaky_bucket_matches_debt_model_with_delay`; fuzz: `check::DELAY`.
//! - **fixed-window**: `FixedWindow` admits at most `limit` per window `[k·P, (k+1)·P)`, aligned to the clock's zero.
//!   *Checked by* `algorithms::fixed_window_matches_window_map`; fuzz: `check::ADMIT_FIXED`.
//! - **sliding-window**: `SlidingWindow` is a weighted counter: admitted iff `prev·(P − e) + (curr + n)·P ≤ limit·P`, exact integers,
//!   with `e` the time into the current window. *Checked by*
//!   `algorithms::sliding_window_matches_weighted_window_map`; fuzz: `check::ADMIT_SLIDING`.
//! - **sliding-log**: `SlidingLog` is exact: at most `limit` admitted in every interval `(t − P, t]`.
//!   *Checked by* `algorithms::sliding_log_matches_timestamp_list`; fuzz: `check::ADMIT_LOG`.
//! - **window-large-index**: A window index never wraps, whatever the clock's reading.
//!   *Checked by* `edge_cases::window_index_beyond_32_bits_does_not_wrap`,
//!   `edge_cases::window_index_at_the_layout_bound_does_not_wrap`.
//! - **idle-gap**: A key idle for any time up to the horizon decides as a fresh key.
//!   *Checked by* `edge_cases::fifty_year_idle_gaps_read_as_fresh`.
//!
//! # Decisions
//!
//! - **remaining**: Every `Decision`'s `remaining()`: how many more requests of cost 1 would be admitted right now, after this one.
//!   *Checked by* `peek::a_peek_is_the_decision_the_next_check_gets`; fuzz: `check::REMAINING`.
//! - **remaining-booked**: `remaining()` is 0 while a booking is pending (every request queues
//!   behind it). *Checked by* `peek::remaining_is_zero_while_a_booking_is_pending`.
//! - **reset-after**: `reset_after()` is the duration until the full quota is available again.
//!   *Checked by* fuzz: `check::RESET`; `promises::a_queued_denial_reports_the_states_reset_time`.
//! - **retry-after**: `retry_after()` is the exact wait until the same request would fit; never too early,
//!   even measured from a stale reading; `None` when allowed. *Checked by*
//!   `edge_cases::retry_after_from_a_stale_reading_is_not_too_early`; fuzz: `check::RETRY`.
//! - **limit-burst**: `limit()` is the quota's limit (not the burst), `burst()` the most admitted at once.
//!   *Checked by* fuzz: `check::LIMIT`.
//! - **cannot-fit**: A cost that can never fit is an error, not a denial. *Checked by*
//!   `edge_cases::costs_beyond_capacity_are_errors_not_denials`; fuzz: `check::CANNOT_FIT`.
//! - **peek**: `peek()` and `peek_n(n)` return the decision a request would get now without consuming anything or inserting the key.
//!   *Checked by* `peek::a_peek_is_the_decision_the_next_check_gets`,
//!   `peek::a_peek_n_is_the_decision_the_next_check_n_gets`; fuzz: `check::PEEK`.
//! - **no-overflow**: Limits up to `u32::MAX` and costs past `2^31` never overflow a sum.
//!   *Checked by* `edge_cases::u32_max_limits_do_not_overflow`,
//!   `edge_cases::a_fixed_window_booking_never_overflows_its_count`.
//!
//! # Building: what `build()` refuses
//!
//! `build()` refuses with a `ConfigError` naming the bound. Each bound is a rule of its own;
//! all of them are *checked by* fuzz `config` (`BOUNDS`, each refusal in order) and the tests
//! named.
//!
//! - **zero**: A zero limit, period or burst is refused. `edge_cases::zero_limit_period_and_burst_are_refused`.
//! - **window-burst**: A burst on a window algorithm is refused (windows accept no burst other
//!   than `limit`). `edge_cases::burst_on_a_window_algorithm_is_refused`.
//! - **bucket-rate**: A bucket rate of more than one request per nanosecond is refused (its
//!   emission interval would round to zero). The windows and the log count a limit per period,
//!   which takes any rate their layouts below hold.
//!   `edge_cases::more_than_one_request_per_nanosecond_is_refused_by_the_buckets_only`.
//! - **span**: `burst·T` or the period beyond 146 years is refused.
//!   `edge_cases::spans_beyond_the_horizon_are_refused`, `edge_cases::century_long_periods_work`.
//! - **window-layout**: Window quotas whose counts and full window index do not fit one word
//!   are refused: with `c` the bits of the limit, the period must exceed `2^(c−1)` ns for
//!   `FixedWindow`, respectively `2^(2c−1)` ns for `SlidingWindow` (one bit of either word
//!   marks a booking ahead). So a `SlidingWindow` takes up to 32,767 per second, 262,143 per minute or
//!   2,097,151 per hour; a `FixedWindow` 1,048,575 per millisecond or any `u32` limit per 2.2 s.
//!   `edge_cases::window_layouts_too_fine_are_refused`,
//!   `readme_bounds::the_guide_states_the_window_bounds_the_builder_enforces` (reads these
//!   figures from this page).
//! - **log-limit**: A `SlidingLog` limit above 65,536 is refused.
//!   `edge_cases::sliding_log_too_large_is_refused`, `readme_bounds`.
//! - **table-memory**: A keyed table or a sliding log too large to allocate is an error, not an
//!   abort. `keyed_memory::a_sliding_log_too_large_to_allocate_is_an_error_not_an_abort`,
//!   `keyed_memory::invalid_capacity_reports_the_key_count_asked_for`.
//!
//! # Threads
//!
//! - **threads**: Concurrent callers of one limiter never get more than the quota between them.
//!   *Checked by* `threads::frozen_clock_admits_exactly_the_capacity`,
//!   `threads::frozen_clock_mixed_costs_account_exactly`,
//!   `threads::advancing_clock_never_exceeds_the_quota`, loom
//!   `cell::three_threads_frozen_clock_admit_exactly_capacity`,
//!   `cell::multi_cost_requests_never_overshoot`.
//! - **threads-keyed**: Threads on a keyed table never admit more than the quota per key.
//!   *Checked by* `keyed_threads::frozen_clock_phases_admit_exactly_capacity_per_key`,
//!   `keyed_threads::running_clock_never_over_admits`, loom
//!   `table::frozen_clock_admits_exactly_capacity_per_key`.
//! - **own-key**: A request for key A is never applied to key B's state, even when A's slot is
//!   reclaimed or evicted for B during the request. *Checked by* loom
//!   `table::idle_reclaim_racing_an_update`, `table::eviction_racing_an_update`,
//!   `locked::log_lookup_racing_a_reclaim_keeps_to_its_own_key`.
//! - **once**: A key is never present twice in a table. *Checked by* loom
//!   `table::two_threads_claim_the_same_empty_slot_for_the_same_key`,
//!   `table::two_threads_reclaim_for_the_same_new_key`, `table::full_size_windows_insert_each_key_once`,
//!   `evict::two_claims_of_one_key_ranking_different_victims`,
//!   `locked::log_same_new_key_is_installed_once`.
//! - **reclaimed**: A request that finds its key reclaimed by a later reading is decided no
//!   earlier than the newest reclaim in its shard: it never re-earns quota the old state
//!   withheld. Its waits (`reset_after`, `retry_after`, a reservation's wait, a refusal's
//!   `retry_after`) are measured from its own reading. *Checked by* `keyed_reclaim_race::a_reclaim_while_a_request_is_in_flight_never_gives_the_quota_back`,
//!   `keyed_reclaim_race::a_key_asked_for_behind_its_reclaim_gets_its_waits_from_its_reading`,
//!   `keyed_reclaim_race::a_refusal_behind_a_reclaim_says_when_the_soonest_entry_frees_up_from_the_reading`,
//!   loom `table::reclaim_in_flight_never_re_earns_quota`,
//!   `locked::model_request_in_flight_across_a_drop_decides_after_it`.
//! - **portable**: Without the inline 16-byte atomics (`TOLLGATE_ATOMICS=portable`, or a CPU or
//!   target without them), every verb decides alike. *Checked by*
//!   `portable_atomics::without_the_inline_atomics_every_verb_decides_alike`,
//!   `src/machine/tests.rs`.
//!
//! # Keyed tables
//!
//! - **keyed-model**: A keyed table decides every key as one limiter per key would.
//!   *Checked by* `keyed_model::keyed_agrees_with_a_map_of_single_key_limiters`,
//!   `keyed_model::unsized_and_address_keys_agree`.
//! - **memory-fixed**: A table's memory is fixed at build: no number of new keys changes
//!   `memory_bytes()`. *Checked by* `keyed_flood::a_million_new_keys_change_memory_by_zero`,
//!   `tiers::memory_is_fixed_at_build_with_the_largest_tier_ring`.
//! - **memory-known**: The builder's `memory_bytes()` is what `build()` allocates.
//!   *Checked by* `keyed_memory::the_builder_reports_exactly_the_memory_build_takes`.
//! - **idle**: An entry whose state says nothing any more (a bucket full again, its windows over, its log empty) is **idle**: it decides exactly as a fresh key would, so its slot is silently reused by the next new key,
//!   counted in `idle_reclaims`, not as an eviction. *Checked by*
//!   `keyed_model::keyed_agrees_in_a_tiny_table_with_constant_reclaim`; fuzz `keyed`:
//!   `table::IDLE`.
//! - **room**: `max_keys(n)` is room for `n` active keys. Only when both of a new key's groups hold active keys (none idle) does the policy apply.
//!   *Checked by* `keyed_flood::capacity_holds_n_live_keys`; fuzz `keyed`: `table::ROOM`.
//! - **evict**: `OnFull::Evict` tracks the new key in place of the entry that has used least (a bucket's debt, a window's count, the log's entries in the period; ties: the soonest idle),
//!   counted in `evictions`. *Checked by* `eviction_rank::model_token_bucket_evicts_the_smallest_debt`
//!   (and one test per algorithm), `eviction_rank::tiers_tied_in_requests_evict_the_soonest_idle`,
//!   loom `evict::a_claim_racing_a_hit_that_makes_its_victim_busier`; fuzz `keyed`: `table::EVICT`.
//! - **evict-tiers**: Keys of tiers with different rates are ranked by what they used in
//!   requests; a log by every entry its ring holds. *Checked by*
//!   `eviction_rank::tiers_of_different_rates_are_ranked_in_requests`,
//!   `eviction_rank::log_tiers_are_ranked_by_every_entry_they_hold`.
//! - **evict-booked**: An entry holding a reservation for a later window or time ranks above
//!   every entry that holds none; among those, the order is the algorithm's own. *Checked by*
//!   `src/algorithm/tests.rs::rank_puts_a_booking_into_a_later_window_above_a_full_window`;
//!   fuzz `keyed` (`table.rs`).
//! - **throttled-kept**: A throttled key is never forgotten while an entry that has used less
//!   can go. *Checked by* `eviction_rank::flood_never_frees_a_throttled_token_bucket_key` (and one
//!   test per algorithm).
//! - **deny**: `OnFull::Deny`: a new key is refused: a denial whose `retry_after` is when the soonest entry in its groups frees up; counted in `refused`.
//!   A key already tracked is never forgotten. *Checked by*
//!   `keyed_flood::deny_keeps_a_throttled_key_throttled_through_the_flood`,
//!   `keyed_flood::a_refused_new_key_retries_when_the_soonest_entry_goes_idle`; fuzz `keyed`:
//!   `table::REFUSED`.
//! - **allow**: `OnFull::Allow`: a new key is admitted untracked; counted in `untracked`. A key already tracked is never
//!   forgotten. *Checked by* `keyed_flood::allow_admits_untracked_and_keeps_throttled_keys`;
//!   fuzz `keyed`: `table::UNTRACKED`.
//! - **refusal-tier**: A refusal by a full table reports the deciding tier's limit and burst.
//!   *Checked by* `promises::a_refusal_reports_the_deciding_tiers_policy`; fuzz `keyed_ops`.
//! - **reset**: `reset(&key)` / `remove(&key)` leave the key's slot idle, and it is the first reused; other keys
//!   keep their state. *Checked by* `housekeeping::reset_gives_a_fresh_quota_to_that_key_only`,
//!   `housekeeping::remove_frees_the_slot_for_a_new_key`; fuzz `keyed`: `table::RESET`.
//! - **stats-off**: `.stats(false)` counts no decisions. *Checked by*
//!   `housekeeping::stats_off_counts_no_decisions`.
//! - **lock-free**: On x86-64 with `cmpxchg16b` the packed table is lock-free, and
//!   `is_lock_free()` says so. *Checked by* `keyed_memory::the_slot_word_is_lock_free_on_this_machine`.
//! - **huge-pages**: On Linux a table over 4 MiB is advised onto transparent huge pages, and
//!   `huge_pages()` says whether it was. *Checked by*
//!   `huge_pages::a_large_table_lives_on_huge_pages_where_the_kernel_offers_them`,
//!   `huge_pages::a_large_sliding_logs_slots_live_on_huge_pages_too`.
//!
//! # Reservations
//!
//! - **reserve**: A reservation books the earliest time the request fits: for the buckets GCRA
//!   virtual scheduling; the fixed window books into the earliest window where the request fits,
//!   the sliding window at the earliest time its weighted count admits the request, the sliding log at the time its `n`-th oldest entry leaves the window.
//!   *Checked by* `reserve::bucket_waits_are_the_earliest_conforming_time`,
//!   `reserve::reservations_serve_in_booking_order_within_the_quota`; fuzz: `check::RESERVE`.
//! - **pending**: While a booking is pending, `check` denies what would overtake it.
//!   *Checked by* `reserve::reservations_serve_in_booking_order_within_the_quota`; fuzz:
//!   `check::PENDING`.
//! - **pending-sliding**: The sliding window denies what would come before the booking's
//!   window. Within that window its state keeps counts, not the booked time: a request that
//!   fits the counts after a `set_quota` raised the limit or a cancel freed room is admitted,
//!   possibly before an earlier booking's time. *Checked by* fuzz: `check::PENDING`.
//! - **reserve-threads**: Threads booking one key never exceed the quota, each booking
//!   proceeding no earlier than the model allows. *Checked by*
//!   `reserve::threads_booking_one_key_never_exceed_the_quota`,
//!   `reserve::keyed_reservations_match_one_limiter_per_key`.
//! - **max-wait**: A reservation never books a wait beyond `Reservation::MAX_WAIT` (about 36
//!   years) or the caller's bound: beyond it, `ReserveError::TooLong` reports that bound as its `max_wait`,
//!   always less than the wait, and nothing is booked. *Checked by*
//!   `promises::a_too_long_wait_reports_a_bound_it_exceeds`,
//!   `edge_cases::too_long_at_the_horizon_reports_a_max_wait_below_the_wait`; fuzz:
//!   `check::TOO_LONG`.
//! - **reserve-nothing**: A cost that can never fit, or a full table's refusal, books nothing.
//!   *Checked by* `reserve::impossible_costs_and_full_tables_book_nothing`,
//!   `tiers::a_refused_reservation_under_another_tier_changes_nothing`.
//! - **drop-keeps**: Dropping a reservation keeps its booking. *Checked by*: no test checks
//!   this on its own (`set_quota::deciders_racing_changes_see_one_quota_or_the_other` relies on it).
//! - **wait-fifo**: `until_ready` and `wait_blocking` book first and then sleep exactly the
//!   booked wait: waiters are served in arrival order. *Checked by*
//!   `wait::waiters_are_served_in_order_at_their_booked_time`,
//!   `wait::keyed_waiters_of_one_key_do_not_delay_another`, `wait::blocking_waiters_are_spaced`.
//! - **wait-drop**: A waiting future dropped before its turn cancels its booking. *Checked by*
//!   `wait::dropping_a_waiter_cancels_its_booking`.
//!
//! # Cancels and roll-backs
//!
//! - **cancel**: `cancel()` gives back what no later booking depends on, by Go x/time/rate's `CancelAt` rule,
//!   and never more than was booked. *Checked by* `reserve::cancel_follows_the_x_time_rate_rule`,
//!   `reserve::cancels_never_let_the_quota_be_exceeded`; fuzz: `check::CANCEL`.
//! - **cancel-due**: A reservation cancelled once it is due gives nothing back: its capacity
//!   counts as used. *Checked by* `reserve::cancel_follows_the_x_time_rate_rule`; fuzz:
//!   `check::CANCEL`.
//! - **cancel-token**: A token-bucket cancel gives back its tokens less how far what is still booked reaches past its own time: the state's `TAT − τ`, with the `τ` it was booked under, against its due time.
//!   *Checked by* `cancel::a_cancel_gives_back_what_an_admission_within_the_burst_did_not_depend_on`,
//!   `cancel::a_keyed_cancel_measures_with_the_tier_it_was_booked_under`; fuzz `single`
//!   (`model/gcra.rs`).
//! - **cancel-token-order**: Token-bucket cancels made out of order give back more than
//!   x/time/rate would (it measures from its last booking's time, which cancels do not move
//!   back), never more than was booked. *Checked by*
//!   `cancel::a_token_bucket_cancel_after_an_earlier_cancel_gives_back_its_share`.
//! - **cancel-leaky**: A leaky-bucket cancel gives back everything while nothing later was booked into a later slot, else nothing.
//!   *Checked by* fuzz `single` (`model/gcra.rs`); `multi::leaky_bucket_slots_are_given_back`.
//! - **cancel-window**: A window booking (fixed or sliding) gives its count back in any order
//!   while the key is still in the booking's window. *Checked by*
//!   `cancel::a_fixed_window_booking_cancelled_out_of_order_gives_back_its_count`,
//!   `cancel::a_fixed_window_cancel_into_a_later_window_restores_the_current_one`,
//!   `cancel::later_window_bookings_are_given_back_last_first`.
//! - **cancel-window-moved**: The window a booking moved the key from is given back only by
//!   cancelling that booking while nothing else is booked in its window; else its rest stays
//!   given up: a fixed window counts it at the limit, a sliding window admits nothing before
//!   the window the key was moved into starts. *Checked by*
//!   `cancel::a_fixed_window_move_is_undone_only_last_first`,
//!   `cancel::later_window_bookings_are_given_back_last_first`.
//! - **cancel-log**: A sliding-log booking for a later time gives nothing back once anything
//!   was logged after it, even at the same time: the entries the later one overwrote are not
//!   known to it. Cancelled last first, such bookings give everything back. *Checked by*
//!   `cancel::log_bookings_for_one_time_are_given_back_last_first`.
//! - **cancel-log-entries**: A log cancel writes back exactly the entries its booking
//!   overwrote, and a cancel made before the booking is due frees the key at once. *Checked by*
//!   `cancel::a_log_cancel_writes_back_each_overwritten_entry`,
//!   `cancel::a_log_cancel_before_its_booking_is_due_frees_the_key_now`,
//!   `cancel::a_log_cancel_after_a_longer_period_keeps_the_admissions_it_overwrote`,
//!   `cancel::a_log_cancel_out_of_order_gives_back_over_entries_long_out_of_the_window`.
//! - **own-state**: A booking is given back only to the state it was made on: after `reset`,
//!   `remove`, a reclaim or an eviction of the key, a cancel or roll-back gives nothing to the
//!   fresh state. Each entry carries a generation, never matched by value. *Checked by* `promises::a_cancel_after_reset_gives_nothing_to_the_fresh_state`,
//!   `promises::a_roll_back_after_reset_gives_nothing_to_the_fresh_state`,
//!   `housekeeping::a_reservation_of_a_reset_key_gives_nothing_back`,
//!   `eviction_rank::a_cancel_after_the_key_was_evicted_gives_nothing_to_its_new_state`.
//! - **converted**: A bucket's booking gives nothing back after a `set_quota` or tier change that converted a bucket's state to another rate,
//!   even once converted back: the booking was converted with the rest (a conversion starts a
//!   new generation of the state). *Checked by*
//!   `carry_over::a_booking_cancelled_after_a_rate_change_gives_nothing_back`,
//!   `cancel::a_booking_gives_nothing_back_after_its_state_was_converted_there_and_back`; fuzz:
//!   `check::CONVERTED_NOTHING`.
//!
//! # Several limits: `check_all`
//!
//! - **all-or-nothing**: `check_all` admits a request only if every limit admits it, and then
//!   takes it from each. *Checked by* `multi::all_or_nothing_against_twin_limiters`,
//!   `multi::threads_never_exceed_any_limit`.
//! - **denial-nothing**: A denial takes nothing from any limit, in every state of a table (a claim that replaced an idle or evicted entry, a leaky bucket with a later slot booked behind).
//!   *Checked by* `denials_take_nothing::a_denial_takes_nothing_from_a_key_that_claimed_an_idle_slot`,
//!   `denials_take_nothing::a_denial_takes_nothing_from_a_key_that_evicted_an_entry`,
//!   `denials_take_nothing::contended_denials_take_nothing_from_leaky_buckets`,
//!   `multi::impossible_costs_consume_nothing`; fuzz: `check::DENIAL_NOTHING`.
//! - **denial-names**: A denial names every limit that denied and reports the longest wait.
//!   *Checked by* fuzz: `check::DENIAL_NAMES`.
//! - **briefly-fuller**: A concurrent check may see a limit briefly fuller, never emptier.
//!   *Checked by* `multi::threads_never_exceed_any_limit`.
//! - **roll-back**: A roll-back gives back exactly what the booking took, whatever other requests were
//!   admitted in between (theirs stay counted). *Checked by*
//!   `promises::a_roll_back_gives_back_exactly_what_it_took_whatever_came_between`,
//!   `roll_back::a_roll_back_gives_back_exactly_what_it_booked_under_any_interleaving`.
//! - **roll-back-late**: A bucket's roll-back gives back the part of the booking's debt still
//!   outstanding: all of it at once, never more than it holds if time passed. *Checked by*
//!   `promises::a_late_roll_back_never_makes_capacity`.
//! - **leaky-last**: Leaky buckets are booked after every other limit (the decisions still come in the order given),
//!   so a denial by any other kind of limit never touches them. *Checked by*
//!   `denials_take_nothing::contended_denials_take_nothing_from_leaky_buckets`; fuzz `keyed_ops`.
//! - **leaky-slot-back**: A leaky bucket rolled back because another leaky bucket of the same
//!   check denied gets its slot back whole. Requests scheduled behind it meanwhile keep their
//!   release times, so two releases may come closer than `T`, by at most the slot given back,
//!   once per such roll-back; never more is admitted than the token bucket admits. *Checked by*
//!   `multi::leaky_bucket_slots_are_given_back`, `promises::a_roll_back_gives_back_exactly_what_it_took_whatever_came_between`.
//! - **roll-back-converted**: A bucket whose state a `set_quota` (or a request of another tier)
//!   converted between the booking and the roll-back gives nothing back. *Checked by*
//!   `carry_over::a_booking_cancelled_after_a_rate_change_gives_nothing_back`.
//! - **zero-cost**: A zero-cost multi-check inserts nothing. *Checked by*
//!   `promises::a_zero_cost_multi_check_inserts_nothing`.
//! - **costs**: `check_all_costs` counts each limit's own cost, all or nothing. *Checked by*
//!   `multi::mixed_costs_never_exceed_any_limit_and_a_denial_takes_nothing`.
//!
//! # Run-time quotas and tiers
//!
//! - **one-quota**: Every decision is made with one quota, old or new, never a mix. *Checked by*
//!   `set_quota::deciders_racing_changes_see_one_quota_or_the_other`, loom
//!   `cell::request_racing_a_rate_change_is_priced_in_one_interval`, `seqlock::*`.
//! - **carry-over**: What a key has used carries over in requests: a bucket's debt at the change `c` is converted into the new quota's requests, `TAT' = c + ⌈(TAT − c)·T_new / T_old⌉`, rounded up so the limit is never exceeded.
//!   *Checked by* `carry_over::raising_the_rate_shortens_the_next_reservation_as_x_time_rate`,
//!   `carry_over::many_quota_changes_keep_what_each_key_used`; fuzz: `check::SET_QUOTA_BUCKET`.
//! - **carry-over-exact**: The conversion is exact however long the debt, up to the horizon.
//!   *Checked by* `carry_over::a_converted_debt_is_carried_exactly_up_to_the_horizon`.
//! - **horizon-conversion**: A converted debt ends at the clock's horizon (2^62 ns after its
//!   zero, about 146 years) at the latest, unless it already ended later; converted back to a
//!   faster rate, what is left of that is converted.
//!   *Checked by* `set_quota::a_debt_converted_past_the_horizon_ends_there`; fuzz `single` and
//!   `budget` (`model/gcra.rs`, `model/budget.rs`).
//! - **monotone**: Raising a limit never lengthens a wait; lowering one never shortens it.
//!   *Checked by* `carry_over::raising_never_lengthens_a_wait_and_lowering_never_shortens_one`.
//! - **change-bound**: Over a span `[a, b]` around a change at `c`, at most `burst_old + (c − a)/T_old` are admitted before `c`,
//!   and from `c` on at most `burst_new + (b − c)/T_new` less what the key still owed at `c` in
//!   new requests. *Checked by* `set_quota::buckets_after_a_change_stay_within_the_new_quota`.
//! - **priced-once**: A request is never priced at one rate on a state counted at the other:
//!   a decision that read the old quota and finds the state converted starts over.
//!   *Checked by* `set_quota::deciders_racing_changes_see_one_quota_or_the_other`,
//!   `set_quota::keyed_deciders_racing_more_rates_than_classes_never_exceed_the_largest`.
//! - **rates**: A keyed table tells 16 bucket rates apart at once, one of them the rate it was
//!   built with; more tier rates is `ConfigError::TooManyRates`. Rates `set_quota` retired are
//!   reused once no request that read them can still write them. *Checked by*
//!   `carry_over::too_many_distinct_tier_rates_is_an_error`,
//!   `carry_over::many_quota_changes_keep_what_each_key_used`,
//!   `set_quota::keyed_deciders_racing_more_rates_than_classes_never_exceed_the_largest`.
//! - **windows-keep**: The windows keep their counts and apply the new limit at once; the window containing the change admits at most
//!   `max(old, new)`. The sliding log keeps its timestamps. *Checked by*
//!   `set_quota::windows_and_log_keep_their_state_exactly`; fuzz: `check::SET_QUOTA_WINDOW`.
//! - **period-fixed**: A window's period is fixed at build (`ConfigError::PeriodChange`).
//!   *Checked by* `set_quota::refused_changes_change_nothing`; fuzz `config`.
//! - **ring-fixed**: A sliding log's rings keep the size they were built with (`ConfigError::LogBeyondRing` above it).
//!   *Checked by* `set_quota::refused_changes_change_nothing`; fuzz `config`, `single`.
//! - **refused-change**: A change the limiter refuses changes nothing. *Checked by*
//!   `set_quota::refused_changes_change_nothing`.
//! - **keyed-change**: A keyed table keeps every key's state across a change, as one limiter
//!   per key. *Checked by* `set_quota::keyed_changes_match_one_limiter_per_key`.
//! - **tiers**: A request under another tier converts the key's debt, as run up under the tier
//!   that wrote it, into its own tier's requests. *Checked by*
//!   `carry_over::what_a_key_used_carries_over_between_plans`,
//!   `tiers::tiers_decide_as_one_limiter_per_key_switched_to_the_tier`,
//!   `reserve::a_reservation_or_charge_on_a_key_another_tier_wrote_counts_what_it_used`,
//!   `carry_over::threads_on_two_tiers_never_exceed_the_larger_burst`.
//! - **tier-period**: The windows' and the log's tiers share one period; their counts carry
//!   over as they are. *Checked by* `tiers::window_and_log_tiers_share_the_period`.
//!
//! # Token budgets
//!
//! - **charge**: `charge(n)` takes its cost after the fact, **never denied**: whatever is left is used up and the key then **owes** the rest.
//!   *Checked by* `charge::charges_and_give_backs_follow_the_model_on_one_limiter`,
//!   `charge::charges_and_give_backs_follow_the_model_on_a_keyed_table_and_a_tier`; fuzz
//!   `budget`: `budget::CHARGE`.
//! - **debt-bound**: A debt is bounded: a bucket or a window owes at most one burst past its quota.
//!   `charge_owing(n, max_owed)` sets another bound; for the sliding window the bound is on its weighted count, the previous window's weight included, as `owed` is.
//!   *Checked by* `charge_log::a_sliding_window_charge_owes_at_most_max_owed_while_the_previous_window_weighs`,
//!   `charge::any_debt_bound_is_taken_without_overflow`; fuzz `budget`: `budget::BOUND`.
//! - **dropped**: The part of a cost past the bound is not counted, and `Charge::dropped()` says how much.
//!   *Checked by* fuzz `budget`: `budget::BOUND`; `charge::charges_and_give_backs_follow_the_model_on_one_limiter`.
//! - **owed-saturates**: `owed()` saturates at `u32::MAX`, and `fit()` is true only when
//!   nothing is owed; the Redis exact mode answers the same.
//!   *Checked by* `charge::a_debt_past_2_32_requests_saturates_owed`,
//!   `redis::charge::a_debt_past_2_32_requests_saturates_owed`,
//!   `redis::charge::debts_past_2_32_requests_agree_with_the_local_engine`; fuzz `budget`.
//! - **log-overdraft**: A sliding log needs no bound: its overdraft ends one period after the charge, however large.
//!   *Checked by* fuzz `budget`: `budget::LOG_TRULY_HELD`.
//! - **charge-threads**: Charges and give-backs racing checks never admit more than the budget
//!   plus the debt bound, and lose nothing. *Checked by*
//!   `charge::charges_racing_checks_admit_no_more_and_lose_nothing`.
//! - **give-back**: `Charge::give_back(n)` returns part or all of what a charge took, to the state it was taken from only:
//!   never after a `reset`, `remove` or eviction of the key. *Checked by* fuzz `budget`:
//!   `budget::REFUND`, `budget::FRESH`.
//! - **give-back-bucket**: A bucket's charge gives back only what of it the key still owes
//!   (time pays debts off). *Checked by* fuzz `budget`: `budget::REFUND`.
//! - **give-back-converted**: A bucket's charge gives nothing back after a conversion to
//!   another rate, whether or not it owed anything then, even once converted back. On a
//!   `RateLimiter` the conversion is a `set_quota` that changes its interval; on a keyed table,
//!   a request that writes a key's state at another rate than it was written at: a tier's, or
//!   the first after a `set_quota` that changed the rate. *Checked by*
//!   `charge_convert::only_a_set_quota_that_changes_the_interval_ends_a_charges_give_backs`,
//!   `charge_convert::a_charge_gives_nothing_back_after_set_quota_converted_an_empty_bucket_and_back`,
//!   `charge_convert::a_keyed_charge_gives_nothing_back_after_another_tier_wrote_the_key_and_back`.
//! - **give-back-set-quota**: A `set_quota` that changes a bucket's rate ends, at once, the
//!   give-backs and cancels of every key written at a rate no tier uses after it (on
//!   `RateLimiter`, keyed tables and tiers alike): from the conversion on, the debt is paid at
//!   another rate and the state keeps no record of when that began, so it cannot tell what
//!   of the charge it still holds.
//!   *Checked by* `charge_convert::a_set_quota_that_changes_the_rate_ends_give_backs_and_cancels_at_once`.
//! - **give-back-window**: A window's charge gives back while the state is still in the charged window (the sliding window: until something is counted in a later one).
//!   *Checked by* fuzz `budget`: `budget::REFUND`.
//! - **give-back-log**: A log's charge gives back exactly while it is the log's last write, in parts too (the part past its ring first, which frees nothing).
//!   *Checked by* `charge_log::a_log_charge_given_back_in_parts_gives_every_part`,
//!   `charge_log::a_log_overdraft_given_back_in_part_stays_the_last_write`; fuzz `budget`:
//!   `budget::REFUND`.
//! - **give-back-log-later**: After later writes of its instant, a log's charge gives back
//!   nothing once a later charge of that instant overdrew the log or a stateless `give_back`
//!   took entries: the log cannot tell its entries from those: it keeps them until its period ends, never fewer than it holds.
//!   *Checked by* `charge_log::a_log_charge_given_back_after_a_later_overdraft_keeps_the_log_full`,
//!   `charge_log::a_log_charge_given_back_after_a_stateless_give_back_keeps_later_admissions`;
//!   fuzz `budget`: `budget::LOG_TRULY_HELD`.
//! - **stateless-give-back**: `give_back(n)` on the limiter gives back without a `Charge` (a stateless caller: never below an empty state; it cannot tell its own charge from others').
//!   A window gives back from its counts that still weigh, the current window's first (the sliding window's previous one next); a log
//!   from its newest entries, and nothing while every slot of its ring is in the window.
//!   *Checked by* fuzz `budget`: `budget::GIVE_BACK`.
//! - **stale-log-charge**: A log charge read at a time older than the newest entry is logged at
//!   that entry's time. *Checked by* `charge::a_stale_log_charge_is_no_booking`.
//!
//! # Redis (feature `redis`)
//!
//! Exact mode (`RedisRateLimiter`):
//!
//! - **redis-engine**: Every algorithm decides as the local engine does, in whole
//!   microseconds, including backward clock readings. *Checked by*
//!   `redis::differential::redis_agrees_with_the_local_engine`,
//!   `redis::exact::instances_share_one_limit_exactly`.
//! - **redis-timeout**: Every call ends within the timeout: an error, never a hang.
//!   *Checked by* `redis::failure::hung_server_times_out_within_the_timeout`,
//!   `redis::failure::silent_server_times_out`, `redis::failure::garbage_replies_are_errors`.
//! - **redis-restart**: A Redis restart (its script cache gone) is handled. *Checked by*
//!   `redis::failure::stopped_redis_gives_errors_then_service_resumes`.
//! - **redis-unrepresentable**: A quota the Lua arithmetic cannot hold below 2^53 is refused
//!   at build (`Error::Unrepresentable`). *Checked by*
//!   `redis::exact::unrepresentable_quotas_are_refused_at_build`,
//!   `redis::edges::billing_period_fixed_windows_build`.
//! - **redis-interval**: The bucket interval is `⌈period_µs / limit⌉` µs, rounded up.
//!   *Checked by* `redis::edges::bucket_intervals_in_whole_microseconds_are_rounded_up`.
//! - **redis-ttl**: Every key's TTL is set in the script that writes it, to the time until it
//!   is idle; a charged key's TTL covers its debt; denials write nothing. *Checked by*
//!   `redis::exact::keys_carry_ttls_and_expire`, `redis::charge::a_charged_keys_ttl_covers_its_debt`.
//! - **redis-set-quota**: After `set_quota`, a key never gets more than a limiter built fresh
//!   with the new quota would give it. *Checked by*
//!   `redis::set_quota::the_stated_bound_holds_across_every_kind_of_change`,
//!   `redis::set_quota::deciders_racing_changes_see_one_whole_quota`.
//! - **redis-carry-over**: The exact mode's buckets carry what a key used over in requests, as
//!   in process; the first admission or denial under the new quota stores the conversion, a
//!   peek stores nothing. *Checked by* `redis::carry_over::plan_upgrades_and_downgrades_carry_over_what_was_used`,
//!   `redis::carry_over::a_denial_under_a_lowered_limit_stores_the_conversion`,
//!   `redis::peek::a_peeked_denial_stores_no_conversion`.
//! - **redis-check-all**: `tollgate::redis::check_all` decides several limits all or nothing in one
//!   script; on Redis Cluster a cross-slot call is refused before anything is sent.
//!   *Checked by* `redis::multi::a_denial_by_any_limit_consumes_nothing_from_the_others`,
//!   `redis::multi_differential::redis_check_all_agrees_with_the_local_check_all`,
//!   `redis::cluster::check_all_on_a_cluster_needs_one_slot`.
//! - **redis-charge**: Charges and give-backs follow the in-process rules, decision for
//!   decision. *Checked by* `redis::charge::charges_and_give_backs_agree_with_the_local_engine`,
//!   `redis::charge::concurrent_charges_and_checks_count_everything_once`,
//!   `redis::charge::a_give_back_never_goes_below_empty`.
//! - **redis-peek**: A peek writes nothing and creates no key. *Checked by*
//!   `redis::peek::a_peek_writes_nothing_and_decides_as_a_check`,
//!   `redis::peek::a_peek_of_a_new_key_creates_nothing`, `redis::cluster_peek::a_peek_writes_nothing_on_a_cluster`.
//! - **redis-fallback**: `Fallback::Allow`, `Deny` and `Local` answer while Redis is away.
//!   *Checked by* `redis::failure::fallback_policies_decide_while_redis_is_down`.
//! - **redis-brace**: A prefix containing a brace is refused at build. *Checked by*
//!   `redis::cluster::a_prefix_with_braces_is_refused`.
//!
//! Hybrid mode (`HybridRateLimiter`):
//!
//! - **hybrid-bound**: One window's global count exceeds the limit by at most `3·N·r·(I + d)`,
//!   failed syncs included. *Checked by* `redis::hybrid::rounds_stay_within_the_bound_and_converge`,
//!   `redis::overshoot_faults::overshoot_stays_within_the_bound_through_failed_syncs`,
//!   `redis::charge::hybrid_charges_stay_within_the_bound`.
//! - **hybrid-idempotent**: A sync sent again counts nothing twice. *Checked by*
//!   `redis::hybrid::a_sync_whose_reply_was_lost_counts_nothing_twice`.
//! - **hybrid-keys**: `max_keys(n)` holds exactly `n` keys in memory fixed at build.
//!   *Checked by* `redis::hybrid::max_keys_admits_exactly_that_many_distinct_keys`,
//!   `redis::hybrid::key_table_memory_is_fixed_at_build_and_too_large_is_an_error`.
//! - **hybrid-peek**: A peek inserts nothing and marks nothing for the sync. *Checked by*
//!   `redis::hybrid_peek::a_peek_inserts_nothing`, `redis::hybrid_peek::a_peek_marks_nothing_for_the_sync`.
//!
//! # Middleware (feature `tower`)
//!
//! - **no-key**: A request a policy cannot key is refused by default (500, saying why).
//!   *Checked by* `http::missing_key::no_peer_address_is_a_500_that_says_why_on_every_request`,
//!   `http::missing_key::grpc_request_without_peer_is_internal_never_an_http_error`.
//! - **retry-after-header**: `Retry-After` is whole seconds rounded up, never 0.
//!   *Checked by* `http::axum_server::retry_after_is_whole_seconds_rounded_up_and_waiting_it_admits`,
//!   `http::axum_server::sub_second_wait_reads_one_second_never_zero`.
//! - **q-limit**: `RateLimit-Policy`'s `q` is the quota's limit, not the burst. *Checked by*
//!   `http::axum_server::q_is_the_quota_limit_not_the_burst_and_legacy_fields_on_request`.
//! - **grpc-200**: A denied gRPC request gets HTTP 200 with `grpc-status: 8`, never a 429.
//!   *Checked by* `http::grpc::grpc_denial_is_http_200_never_429`,
//!   `http::grpc::denied_call_is_resource_exhausted_with_retry_info`.
//! - **client-ip**: A peer that is not a trusted proxy is the client; behind trusted proxies,
//!   the rightmost address of all `X-Forwarded-For` lines that is not trusted. *Checked by*
//!   `http::spoofing::untrusted_peer_cannot_pick_its_key`,
//!   `http::spoofing::two_trusted_hops_key_the_rightmost_untrusted_address`,
//!   `http::spoofing::an_appended_second_line_is_the_proxys_and_wins`.
//! - **ipv6**: IPv4-mapped IPv6 is IPv4; IPv6 clients are keyed by their /64. *Checked by*
//!   `http::spoofing::ipv6_clients_share_their_64_and_mapped_ipv4_is_ipv4`.
//! - **policies**: The policies of one layer are all or nothing: a request denied by one
//!   consumes nothing from the others. *Checked by* `http::axum_server::two_policies_are_all_or_nothing`,
//!   `http::backends::a_late_denial_gives_back_the_earlier_policies_admissions`.
//! - **stacked-layers**: Stacked layers are not all or nothing: a request an inner layer denies
//!   has been counted by the layers outside it.
//!   *Checked by* `http::axum_server::all_or_nothing_holds_for_one_layers_policies_not_for_stacked_layers`.
//! - **shadow**: A `.shadow()` policy decides and counts but never enforces, and is named in
//!   no `RateLimit*` header unless `Policy::shadow_headers(true)`.
//!   *Checked by* `http::axum_server::a_shadow_policy_never_enforces_and_tells_clients_nothing_by_default`,
//!   `http::axum_server::shadow_headers_opt_in_reports_the_shadow_decisions_but_never_enforces`.
//! - **backend-error**: A backend error answers 503 by default. *Checked by*
//!   `http::backends::backend_failure_is_503_by_default_or_allowed_when_configured`.
//! - **budget-once**: A budget policy charges the recorded cost exactly once: when the body
//!   ends, is dropped early, or the handler fails. *Checked by*
//!   `http::budget::a_client_that_disconnects_mid_stream_is_charged_only_what_was_streamed`,
//!   `http::budget::a_body_dropped_after_k_frames_is_charged_exactly_k_and_a_whole_one_before_its_end`,
//!   `http::budget::a_failed_or_cancelled_request_is_charged_what_the_handler_recorded`.
//! - **budget-first**: Budget policies are asked first, so a request one refuses takes
//!   nothing from the others. *Checked by*
//!   `http::budget::with_request_count_policies_all_or_nothing_holds_both_ways`.
//! - **budget-lost**: A charge nothing counted on Redis is counted in
//!   `RedisStats::background_errors`. *Checked by* `http::redis_budget::a_charge_lost_to_a_redis_outage_is_counted`.
//!
//! # What no test checks yet
//!
//! These are stated in the guide and hold by construction, but no test checks them on their
//! own; each wants one:
//!
//! - *collision*: two different keys share a limiter state only if their 64-bit hashes are
//!   equal (a collision makes them share one quota: each is limited more, never less).
//! - *drop-keeps* (above): dropping a reservation keeps its booking.
//! - *metrics-labels*: the middleware's metrics never carry a per-key label.
