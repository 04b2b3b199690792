"""The built-in law families (scaling.fits.family.LawFamily), one light module each: `scalelab fit
<law>`'s flags and what runs them. The MoE and lr-annealing families sit in their own packages
(scaling/moe/family.py, scaling/lr_annealing/family.py), which are above fits in scaling's layers."""
