//! Fixed array keys made once, and arrays filled with them without a lookup per element.
//!
//! `Metrics::snapshot()` builds about seventy keyed elements per upstream name. Inserting with a
//! Rust `&str` makes a new zend_string for every key of every name, hashes it and looks it up
//! first: that was most of the call's cost. The keys never change, so they are made once, as
//! PHP makes its own known strings:
//! - at MINIT, permanent interned strings: never refcounted, their hash computed, valid until the
//!   process ends (every request, every FPM child forked after MINIT);
//! - when the extension was loaded after PHP's startup (an FPM pool's
//!   `php_admin_value[extension]`), a string interned now would be freed at the end of the
//!   request, so each use makes ordinary strings instead, released when the use ends. Slower,
//!   never dangling.

use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::OnceLock;

use ext_php_rs::boxed::ZBox;
use ext_php_rs::ffi::{
    zend_array_dup, zend_hash_add_new, zend_hash_index_update, zend_hash_str_update, zend_string,
    zend_string_init_interned, GC_IMMUTABLE, IS_ARRAY_EX, IS_DOUBLE, IS_LONG, IS_TYPE_REFCOUNTED,
    Z_TYPE_FLAGS_SHIFT,
};
use ext_php_rs::types::{ArrayKey, ZendHashTable, ZendStr, Zval};

/// A set of distinct, non-numeric key texts (`'4xx'` is fine, `'1'` is not: PHP turns the key
/// `'1'` into the integer 1, and a string key `'1'` could never be looked up).
pub struct KeySet {
    texts: &'static [&'static str],
    permanent: OnceLock<PermanentKeys>,
}

/// Pointers to permanent interned strings: immutable, never freed before the process ends.
struct PermanentKeys(Box<[NonNull<zend_string>]>);

// SAFETY: permanent interned strings are immutable (no refcount, hash already computed) and live
// until the process ends, so sharing the pointers between threads is sound.
unsafe impl Send for PermanentKeys {}
unsafe impl Sync for PermanentKeys {}

impl KeySet {
    pub const fn new(texts: &'static [&'static str]) -> Self {
        KeySet {
            texts,
            permanent: OnceLock::new(),
        }
    }

    /// Makes the keys permanent interned strings. Call at MINIT only, and only when PHP's startup
    /// is not over (`php_get_module_initialized()` false): then `zend_string_init_interned` is
    /// the permanent variant.
    pub fn make_permanent(&self) {
        let Some(init) = (unsafe { zend_string_init_interned }) else {
            return;
        };
        let mut keys = Vec::with_capacity(self.texts.len());
        for text in self.texts {
            // SAFETY: during MINIT the engine's interned-string function is the permanent one;
            // it copies the bytes and computes the hash.
            match NonNull::new(unsafe { init(text.as_ptr().cast(), text.len(), true) }) {
                Some(k) => keys.push(k),
                None => return,
            }
        }
        let _ = self.permanent.set(PermanentKeys(keys.into_boxed_slice()));
    }

    /// The keys for one use: the permanent ones, or strings made now and released when the
    /// returned [`Keys`] is dropped (the arrays built with them hold their own references).
    pub fn keys(&self) -> Keys<'_> {
        match self.permanent.get() {
            Some(p) => Keys::Permanent(&p.0),
            None => Keys::Owned(
                self.texts
                    .iter()
                    // SAFETY: a ZBox is never null.
                    .map(|t| unsafe { NonNull::new_unchecked(ZendStr::new(t, false).into_raw()) })
                    .collect(),
            ),
        }
    }
}

/// The keys of one [`KeySet`] for one use.
pub enum Keys<'a> {
    Permanent(&'a [NonNull<zend_string>]),
    /// One reference each, released on drop.
    Owned(Vec<NonNull<zend_string>>),
}

impl Keys<'_> {
    /// The key of the set's text at `index`.
    pub fn get(&self, index: usize) -> Key<'_> {
        let ptr = match self {
            Keys::Permanent(p) => p[index],
            Keys::Owned(o) => o[index],
        };
        Key(ptr, PhantomData)
    }
}

impl Drop for Keys<'_> {
    fn drop(&mut self) {
        if let Keys::Owned(owned) = self {
            for k in owned.drain(..) {
                // SAFETY: the reference `keys()` made and kept is given back once.
                drop(unsafe { ZBox::from_raw(k.as_ptr()) });
            }
        }
    }
}

/// One key of a [`Keys`], valid while it is.
#[derive(Clone, Copy)]
pub struct Key<'a>(NonNull<zend_string>, PhantomData<&'a ()>);

impl Key<'_> {
    /// The key as a string value (`'state' => 'open'`).
    pub fn to_zval(self) -> Zval {
        let ptr = self.0.as_ptr();
        // SAFETY: the string is live (see `Key`). An interned one is not refcounted; any other
        // gets one more reference, owned by the new zval.
        unsafe {
            if (*ptr).gc.u.type_info & GC_IMMUTABLE == 0 {
                (*ptr).gc.refcount += 1;
            }
            let mut z = Zval::new();
            z.set_zend_string(ZBox::from_raw(ptr));
            z
        }
    }
}

/// An integer zval (saturated: a counter past `i64::MAX` reads as `PHP_INT_MAX`). Written field
/// by field: ext-php-rs's setter is a call per value, and this runs for every counter.
fn long(value: u64) -> Zval {
    let mut z = Zval::new();
    z.value.lval = i64::try_from(value).unwrap_or(i64::MAX);
    z.u1.type_info = IS_LONG;
    z
}

/// An array zval owning `table` (never an immutable one here). Written field by field, as
/// `long`: ext-php-rs's setter is an out-of-line call whose result the caller reads back.
fn array(table: ZBox<ZendHashTable>) -> Zval {
    let mut z = Zval::new();
    z.value.arr = table.into_raw();
    z.u1.type_info = IS_ARRAY_EX;
    z
}

/// A float zval.
fn double(value: f64) -> Zval {
    let mut z = Zval::new();
    z.value.dval = value;
    z.u1.type_info = IS_DOUBLE;
    z
}

/// A new array filled with distinct keys (each key added once: no lookup before inserting).
pub struct ArrayBuilder(ZBox<ZendHashTable>);

impl ArrayBuilder {
    /// Sized for `len` elements, so filling it never resizes.
    pub fn with_capacity(len: u32) -> Self {
        ArrayBuilder(ZendHashTable::with_capacity(len))
    }

    /// Adds `value` under `key`, which this array must not hold yet.
    pub fn add(&mut self, key: Key<'_>, value: Zval) {
        let mut value = value;
        // SAFETY: the table is ours alone (refcount 1) and `key` is live; add_new takes its own
        // reference to a non-interned key and moves the zval in, so the zval is forgotten, not
        // dropped.
        unsafe { zend_hash_add_new(&mut *self.0, key.0.as_ptr(), &mut value) };
        std::mem::forget(value);
    }

    pub fn add_long(&mut self, key: Key<'_>, value: u64) {
        self.add(key, long(value));
    }

    /// Sized for `len` elements with keys that are not positions (integers out of 0, 1, 2...
    /// order): laid out as a hash from the start instead of converted at the first such key.
    pub fn with_capacity_keyed(len: u32) -> Self {
        let mut array = Self::with_capacity(len);
        if let Some(init) = crate::engine::zend_hash_real_init_mixed() {
            // SAFETY: a new, empty, uninitialised array of ours.
            unsafe { init(&mut *array.0) };
        }
        array
    }

    /// Adds `value` under the integer key `index`, which this array must not hold yet.
    pub fn add_index_long(&mut self, index: u64, value: u64) {
        let mut z = long(value);
        // SAFETY: as in `add`.
        unsafe {
            match crate::engine::zend_hash_index_add_new() {
                Some(add_new) => add_new(&mut *self.0, index, &mut z),
                None => zend_hash_index_update(&mut *self.0, index, &mut z),
            }
        };
        std::mem::forget(z);
    }

    pub fn add_array(&mut self, key: Key<'_>, value: ArrayBuilder) {
        self.add(key, value.into_zval());
    }

    pub fn into_zval(self) -> Zval {
        array(self.0)
    }
}

/// The keys of an array shape, laid out once per use: each array of that shape is a copy whose
/// values are then written by position (`Metrics::snapshot()` makes ~40 arrays per name).
///
/// A shape whose keys are integers or interned strings and whose values are scalars holds
/// nothing counted by reference, so it is marked immutable, as opcache marks its arrays: the
/// engine then copies it with one `memcpy` instead of adding the keys one by one.
pub struct Shape(ZBox<ZendHashTable>);

impl Shape {
    /// The shape of `array`, whose values are placeholders (integers, floats or null: nothing a
    /// later write by position must release).
    pub fn new(array: ArrayBuilder) -> Self {
        let mut table = array.0;
        // SAFETY: the array is ours alone and was filled by adds only, so its first `nNumUsed`
        // slots are its elements. It is marked only when no slot holds a key or value counted
        // by reference (interned strings carry GC_IMMUTABLE), and unmarked before it is freed.
        unsafe {
            let data = table.__bindgen_anon_1.arData;
            let fixed = (0..table.nNumUsed as usize).all(|i| {
                let slot = &*data.add(i);
                let key = slot.key;
                (key.is_null() || (*key).gc.u.type_info & GC_IMMUTABLE != 0)
                    && u32::from(slot.val.u1.v.type_) <= IS_DOUBLE
            });
            if fixed {
                table.gc.u.type_info |= GC_IMMUTABLE;
            }
        }
        Shape(table)
    }

    /// A new array of this shape, its values the placeholders until written.
    pub fn copy(&self) -> Shaped {
        // SAFETY: `zend_array_dup` copies a live array into a new one of refcount 1, ours.
        // (The binding takes a mutable pointer; the source is only read.)
        let source = (&*self.0 as *const ZendHashTable).cast_mut();
        let copy = unsafe { ZBox::from_raw(zend_array_dup(source)) };
        Shaped(copy)
    }
}

impl Drop for Shape {
    fn drop(&mut self) {
        // An immutable array is never freed (ext-php-rs takes it for PHP's shared empty one).
        // SAFETY: `type_info` is the header's one integer view; the array is ours alone.
        unsafe { self.0.gc.u.type_info &= !GC_IMMUTABLE };
    }
}

/// `table[key] = value` as PHP writes it (a key such as "42" is the int 42), `value` moved
/// in as it is: `ZendHashTable::insert` copies a `Zval` through the stack in pieces and reads
/// it back whole, a stall per name in `Metrics::snapshot()`.
pub fn insert(table: &mut ZendHashTable, key: &str, value: Zval) {
    let mut value = std::mem::ManuallyDrop::new(value);
    let value: *mut Zval = &mut *value;
    // SAFETY: the table takes the value's reference (the update releases any value it
    // replaces), so the value is not dropped here.
    unsafe {
        match ArrayKey::from(key) {
            ArrayKey::Long(index) => {
                zend_hash_index_update(table, index as u64, value);
            }
            _ => {
                zend_hash_str_update(table, key.as_ptr().cast(), key.len(), value);
            }
        }
    }
}

/// A copy of a [`Shape`], filled by position (the order its keys were added in).
pub struct Shaped(ZBox<ZendHashTable>);

impl Shaped {
    /// Writes `value` at `position`, replacing the placeholder there.
    ///
    /// Panics if the shape has no such position.
    pub fn set(&mut self, position: usize, value: Zval) {
        let slot = self.slot(position);
        slot.value = value.value;
        slot.u1 = value.u1;
        std::mem::forget(value);
    }

    /// Writes one more reference to `value` at `position`: for an array several arrays share.
    /// Read in place, not through a clone, which the compiler copies through the stack in
    /// pieces of unequal widths and reads back whole: a stall per value, measured in
    /// `Metrics::snapshot()`.
    ///
    /// Panics if the shape has no such position.
    pub fn set_shared(&mut self, position: usize, value: &Zval) {
        let slot = self.slot(position);
        // SAFETY: a counted value's `counted` points at its live header, as `value` holds a
        // reference to it.
        unsafe {
            let type_info = value.u1.type_info;
            if type_info & (IS_TYPE_REFCOUNTED << Z_TYPE_FLAGS_SHIFT) != 0 {
                (*value.value.counted).gc.refcount += 1;
            }
            slot.value = value.value;
            slot.u1.type_info = type_info;
        }
    }

    /// The slot at `position`, whose placeholder needs no release.
    fn slot(&mut self, position: usize) -> &mut Zval {
        let table: &mut ZendHashTable = &mut self.0;
        assert!(
            position < table.nNumUsed as usize,
            "no position {position} in this shape"
        );
        // SAFETY: the copy is ours alone and was filled by adds only, so its first `nNumUsed`
        // slots are its elements in order; the placeholder there needs no release. `u2` holds
        // the slot's link in the hash chain and is kept: only the value and its type change.
        unsafe {
            let slot = &mut (*table.__bindgen_anon_1.arData.add(position)).val;
            debug_assert!(
                u32::from(slot.u1.v.type_) <= IS_DOUBLE,
                "position {position} already holds a counted value, which would leak"
            );
            slot
        }
    }

    pub fn set_long(&mut self, position: usize, value: u64) {
        self.set(position, long(value));
    }

    pub fn set_double(&mut self, position: usize, value: f64) {
        self.set(position, double(value));
    }

    pub fn into_zval(self) -> Zval {
        array(self.0)
    }
}

/// `key_set!(STATIC: Enum { Variant = "text", ... })`: an enum naming each key and the
/// [`KeySet`] of their texts, in the same order (`keys.get(Enum::Variant as usize)`).
macro_rules! key_set {
    ($set:ident: $enum:ident { $($variant:ident = $text:literal,)* }) => {
        #[derive(Clone, Copy)]
        enum $enum {
            $($variant),*
        }
        static $set: $crate::array_keys::KeySet =
            $crate::array_keys::KeySet::new(&[$($text),*]);
    };
}
pub(crate) use key_set;
